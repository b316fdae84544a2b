from __future__ import annotations

import ast

from amplint.diagnostics import Fix
from amplint.model.names import dotted
from amplint.rules import Invalid, Rule
from amplint.rules._versions import scaler_class


def _ends_path(stmts) -> bool:
    last = stmts[-1] if stmts else None
    if isinstance(last, (ast.Raise, ast.Return, ast.Continue, ast.Break)):
        return True
    return (
        isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
        and ast.unparse(last.value.func) in ("sys.exit", "exit", "quit", "os._exit")
    )


def _opt_level_switch(test) -> bool:
    """``opt_level != "O0"`` (apex's own off level): apex's on/off switch, not a choice of backend."""
    return (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.Eq))
        and "opt_level" in ast.unparse(test.left)
        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "O0"
    )


class ApexAmp(Rule):
    code = "AMP104"
    name = "apex-amp"
    summary = "NVIDIA apex's `amp` (`amp.initialize`, `amp.scale_loss`) is deprecated: use `torch.amp`"
    fix_availability = "always"
    docs = """
## What it does
Checks for calls into NVIDIA apex's mixed-precision API: `apex.amp.initialize(...)`,
`amp.scale_loss(...)`, `amp.master_params(...)` and the rest of `apex.amp`.

## Why is this bad?
apex's `amp` is deprecated by its authors in favour of PyTorch's native AMP, which needs no
separately compiled extension and is maintained with torch: `torch.autocast` for the forward
pass and `torch.amp.GradScaler` for loss scaling. apex's O2/O3 levels also cast the model
to fp16 and keep fp32 master weights, which native AMP does differently (fp32 weights,
fp16 autocast regions).

apex imported behind `try: from apex import amp` / `except ImportError:` is reported where
it is still the default path: an apex call that runs unconditionally (`amp = None` in the
handler, then `amp.initialize(...)` anyway; or `if amp is None: raise ...` first). A guard
that only probes availability and falls back is not reported: apex calls under a condition
(`if APEX_AVAILABLE: ... else: torch.amp...`, `if args.apex:`), in a file that also has a
native path (a torch GradScaler or autocast), or inside a class or function whose name says
it is the apex backend (`class ApexScaler`, `ApexOptimWrapper.backward`) offer apex as one
backend among others.

## Example
```python
from apex import amp
model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
with amp.scale_loss(loss, optimizer) as scaled_loss:
    scaled_loss.backward()
optimizer.step()
```

Use instead:
```python
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(x), y)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
```

## Fix safety
The fix is display-only: the migration touches the model set-up, the loss scaling and the
checkpoint format, so it is described in the message and never applied.
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
""",
        # apex's fused kernels are not apex.amp
        """
import amp_C
from apex.optimizers import FusedAdam
from apex.multi_tensor_apply import multi_tensor_applier
""",
        # an availability probe that falls back to torch.amp
        """
import torch
try:
    from apex import amp
    APEX_AVAILABLE = True
except ImportError:
    APEX_AVAILABLE = False
def backward(loss, optimizer, scaler):
    if APEX_AVAILABLE:
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
    else:
        scaler.scale(loss).backward()
""",
        # the apex backend class of a library that also has a native one
        """
import torch
try:
    from apex import amp
except ImportError:
    amp = None
class ApexScaler:
    def __call__(self, loss, optimizer):
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
class NativeScaler:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cuda")
""",
        # a user option selects apex
        """
try:
    from apex import amp
except ImportError:
    amp = None
def setup(model, optimizer, args):
    if args.apex:
        model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)
    return model, optimizer
""",
        # apex behind an availability probe with a native fallback under the same test
    """
try:
    from apex import amp
except ImportError:
    amp = None
if amp is not None and args.apex:
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
""",
    ]
    invalid = [
        # apex's own opt level is the only switch: apex is the mixed-precision path
        Invalid(
            """
try:
    from apex import amp
except ImportError:
    amp = None
if args.amp_opt_level != "O0":
    model, optimizer = amp.initialize(model, optimizer, opt_level=args.amp_opt_level)
""",
        ),
        # the guarded import, used unconditionally: apex is still the default path
        Invalid(
            """
try:
    from apex import amp
except ImportError:
    amp = None
def backward(loss, optimizer):
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
""",
        ),
        Invalid(
            """
try:
    from apex import amp
except ImportError:
    amp = None
def setup(model, optimizer):
    if amp is None:
        raise ImportError("install apex")
    return amp.initialize(model, optimizer, opt_level="O1")
""",
        ),
        Invalid(
            """
from apex import amp
model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
with amp.scale_loss(loss, optimizer) as scaled_loss:
    scaled_loss.backward()
""",
            count=2,
        ),
        Invalid(
            """
import apex
model, optimizer = apex.amp.initialize(model, optimizer, opt_level="O2")
""",
        ),
    ]

    def check(self, model):
        optional = set()  # names bound by `try: from apex import amp / except ImportError:`
        for imp in model.imports:
            if imp.ctx.guarded:
                for a in imp.node.names:
                    optional.add((a.asname or a.name).split(".")[0])
        # a torch-native AMP path in the same file: apex is the optional alternative
        native_path = bool(model.autocast_calls) or any(model.constructions(k) for k in model.scaler_keys())
        for r in model.refs:
            q = r.qualname
            if not (q == "apex.amp" or q.startswith("apex.amp.")) or r.role not in ("call", "decorator"):
                continue
            if r.ctx.guarded:
                continue
            if (dotted(r.node) or [""])[0] in optional and (
                self._conditional(model, r) or native_path or "apex" in r.func.qualname.lower()
            ):
                continue  # apex as one backend among others
            what = q[len("apex."):]
            sc = scaler_class(model)
            fix = Fix(
                "display-only",
                f"Replace apex.amp with torch.autocast + {sc} (scaler.scale(loss).backward(), "
                "scaler.step(optimizer), scaler.update())",
                (),
            )
            yield self.diagnostic(
                model,
                r.node,
                f"`{what}` is NVIDIA apex's deprecated AMP API; use native `torch.autocast` and `{sc}`",
                fix,
                r.stmt,
            )

    @staticmethod
    def _conditional(model, r) -> bool:
        """Does the apex call run only under a condition? Conditions that come from an
        ``if ...: raise`` before it (the other arm ends the function) do not count."""
        if not r.ctx.lits:
            return False
        ifs = {id(n): n for n in ast.walk(r.func.node) if isinstance(n, ast.If)}
        for lit in r.ctx.lits:
            node = ifs.get(lit.group)
            if node is None:
                return True  # a try/match arm: a condition
            if any(x is r.node for x in ast.walk(node)):
                if _opt_level_switch(node.test):
                    continue  # `if args.opt_level != "O0":` turns apex on or off: no other backend
                return True  # the call sits in an arm of this if
            # the call follows the if: the literal says the other arm ended the path
            # (`if amp is None: raise ...`), which is no fallback
            if not _ends_path(node.body if lit.arm == 1 else node.orelse):
                return True
        return False
