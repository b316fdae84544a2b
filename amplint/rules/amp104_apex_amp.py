from __future__ import annotations

import ast

from amplint.diagnostics import Fix
from amplint.model.names import dotted
from amplint.rules import Invalid, Rule
from amplint.rules._versions import scaler_class


class ApexAmp(Rule):
    code = "AMP104"
    severity = "warning"
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

Every call into `apex.amp` that can run is reported: the default path, and also apex
offered as one backend among others (`if args.apex:`, an `ApexScaler` class beside a native
one, `try: from apex import amp` with a fallback); each is code to migrate. Not reported:
apex's fused kernels and optimizers (`apex.optimizers.FusedAdam`, `amp_C`), and calls under
a torch version guard (`if not hasattr(torch, "amp"):`), which only old torch runs.

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
        # under a torch version guard: only a torch without native AMP runs it
        """
import torch
if not hasattr(torch, "amp"):
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
""",
    ]
    invalid = [
        # reported: an availability probe that falls back to torch.amp
        Invalid(
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
        ),
        # reported: the apex backend class of a library that also has a native one
        Invalid(
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
        ),
        # reported: a user option selects apex
        Invalid(
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
        ),
        # reported: apex behind an availability probe with a native fallback under the same test
        Invalid(
            """
try:
    from apex import amp
except ImportError:
    amp = None
if amp is not None and args.apex:
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
""",
        ),
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
        for r in model.refs:
            q = r.qualname
            if not (q == "apex.amp" or q.startswith("apex.amp.")) or r.role not in ("call", "decorator"):
                continue
            if r.ctx.guarded:
                continue  # under a torch version guard: only old torch runs it
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
