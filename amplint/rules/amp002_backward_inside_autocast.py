from __future__ import annotations

import ast

from amplint.diagnostics import Fix, MoveOutOfWith
from amplint.model import amp_ish
from amplint.rules import Invalid, Rule
from amplint.core.autocast import in_enabled_region, inherited_regions, region_at
from amplint.rules._util import stmt_anchor

# Statement kinds that may move out of an autocast block without changing meaning.
# calls that read parameters or values, never a forward pass
_NOT_FORWARD = {"parameters", "named_parameters", "item", "detach", "float", "size", "numel", "len", "zero_grad"}


def _computes(stmt: ast.stmt, event_nodes: set[int]) -> bool:
    """Does ``stmt`` call anything but AMP events and parameter/value reads (a model, a loss
    function)? Such a call would leave autocast with the statement."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and id(n) not in event_nodes:
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            if name not in _NOT_FORWARD:
                return True
    return False


_MOVABLE = {"backward", "unscale", "clip", "step", "update", "zero_grad", "opt_step", "scale", "framework_backward"}


class BackwardInsideAutocast(Rule):
    code = "AMP002"
    severity = "warning"
    name = "backward-inside-autocast"
    summary = "`.backward()` called inside an autocast region"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for `loss.backward()` or `scaler.scale(loss).backward()` (and
`torch.autograd.backward(...)`, `accelerator.backward(loss)`) inside a `torch.autocast`
block that is enabled or may be (`enabled=` not the literal `False`), accelerate's
`accelerator.autocast()` included (it enters `torch.autocast`), directly or through a
project function called in the block. In project mode it also follows a base class that
calls a method inside autocast (`with torch.autocast(...): self.step(batch)` in
`BaseTrainer.iterate()`): a subclass's `step()` in another module that runs `backward()`
outside a region of its own is reported there (not in an arm of an `if` that turns AMP off).

## Why is this bad?
PyTorch's AMP recipe runs only the forward pass and the loss under autocast: "backward
passes under autocast are not recommended". Backward ops already run in the dtype autocast
chose for the matching forward op. For plain modules the gradients come out identical, but
a custom `autograd.Function` without `torch.amp.custom_bwd` then runs its backward in
reduced precision under autocast (and raises a dtype mismatch once moved out), so the code
only works by accident; and the block hides where the forward ends.

Not reported: a backward that runs only where the region is off, the arm of
`if args.amp:` that a region `autocast(enabled=args.amp)` disables, and a plain backward under
`if scaler is None:` in a region whose dtype is `torch.float16 if args.fp16 else
torch.float32` (float32 autocast turns itself off on CUDA).

## Example
```python
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(x), y)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
```

## Fix safety
The fix moves the backward statement, and every statement after it in the same `with`
block, out of the block. It is safe when everything that moves is backward, `unscale_`,
clipping, `step`, `update` or `zero_grad` and calls nothing else than those and parameter
reads (`model.parameters()`, `loss.item()`); otherwise it is unsafe (other moved statements
would run outside autocast). No fix is offered when the backward's own statement computes
the forward or the loss (`scaler.scale(loss_fn(model(x), y)).backward()`: moved, the forward
would run in fp32), when the backward is nested deeper than the block's own statements, when
it shares its line with an earlier statement, or when the `with` enters other context
managers too; nor for a framework's backward (`accelerator.backward(loss)`), whose move the
execution oracle (torch only) cannot prove.
"""
    valid = [
        # without AMP the region is float32 (CUDA autocast turns itself off) and the plain backward runs there
        """
import torch
def train(model, loader, optimizer, args):
    fp16_scaler = torch.amp.GradScaler("cuda") if args.fp16 else None
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16 if args.fp16 else torch.float32):
            loss = model(x)
            if fp16_scaler is None:
                loss.backward()
                optimizer.step()
        if fp16_scaler is not None:
            fp16_scaler.scale(loss).backward()
            fp16_scaler.step(optimizer)
            fp16_scaler.update()
""",
        """
import torch
with torch.autocast("cuda"):
    loss = model(x)
loss.backward()
""",
        # disabled autocast region
        """
import torch
with torch.autocast("cuda", enabled=False):
    loss = model(x)
    loss.backward()
""",
        # accelerate: the backward after the autocast block
        """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
with accelerator.autocast():
    loss = model(x)
accelerator.backward(loss)
""",
        # a project's own helper called autocast
        """
from mylib import autocast
with autocast():
    loss = model(x)
    loss.backward()
""",
        # backward in a nested function defined inside the block
        """
import torch
with torch.autocast("cpu", dtype=torch.bfloat16):
    def closure():
        loss = model(x)
        loss.backward()
        return loss
opt.step(closure)
""",
        # the plain backward runs only when the autocast is off
    """
import torch
from torch.amp import autocast
def train(args, loader, model, optimizer, scaler):
    for x in loader:
        with autocast("cuda", enabled=args.amp):
            loss = model(x)
            if args.amp:
                scaler_step(scaler, loss, optimizer)
            else:
                loss.backward()
                optimizer.step()
""",
    # a project wrapper called with enabled=False (it forwards **kwargs to torch.amp.autocast)
    """
import torch
from contextlib import contextmanager
@contextmanager
def torch_autocast(device_type="cuda", **kwargs):
    with torch.amp.autocast(device_type=device_type, **kwargs):
        yield
def penalty(x):
    with torch.enable_grad():
        with torch_autocast(enabled=False):
            x = x.detach()
            x.requires_grad = True
            m = (x ** 2).sum()
            m.backward()
    return x.grad
""",
    ]
    invalid = [
        # accelerate's autocast is torch's (Accelerator.autocast enters torch.autocast)
        Invalid(
            """
from contextlib import nullcontext
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
ctx = accelerator.autocast if use_amp else nullcontext
with ctx():
    loss = model(x)
    accelerator.backward(loss)
""",
        ),
        Invalid(
            """
import torch
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
scaler.step(optimizer)
""",
            fixed="""
import torch
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(x), y)
scaler.scale(loss).backward()
scaler.step(optimizer)
""",
        ),
        # nanoGPT-style context variable; the fix moves step/update too
        Invalid(
            """
import torch
from contextlib import nullcontext
ctx = nullcontext() if device == "cpu" else torch.amp.autocast(device_type="cuda", dtype=torch.float16)
for x in loader:
    with ctx:
        loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
""",
            fixed="""
import torch
from contextlib import nullcontext
ctx = nullcontext() if device == "cpu" else torch.amp.autocast(device_type="cuda", dtype=torch.float16)
for x in loader:
    with ctx:
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""",
        ),
        # enabled by a flag: may be enabled; a logging statement moves too, so the fix is unsafe
        Invalid(
            """
from torch.cuda.amp import autocast
with autocast(enabled=use_amp):
    loss = model(x)
    loss.backward()
    print(loss.item())
""",
            fixed="""
from torch.cuda.amp import autocast
with autocast(enabled=use_amp):
    loss = model(x)
loss.backward()
print(loss.item())
""",
            unsafe=True,
        ),
        # nested deeper than the block's own statements: reported, no fix
        Invalid(
            """
import torch
with torch.autocast("cuda"):
    loss = model(x)
    if train:
        loss.backward()
""",
        ),
    ]

    def check(self, model):
        yield from self._through_calls(model)
        yield from self._under_inherited_autocast(model)
        for e in model.events():
            if e.kind not in ("backward", "framework_backward"):
                continue
            region = region_at(model, e)
            if region is None:
                continue  # outside autocast, or in a region that is off there
            what = "backward()" if e.kind == "backward" else f"{model.text(e.node.func)}()"
            yield self.diagnostic(
                model,
                e.node,
                f"`{what}` inside an autocast region; move it after the `with` block "
                "(run only the forward pass and the loss under autocast)",
                self._fix(model, e, region) if e.kind == "backward" else None,
                e.stmt,
            )

    def _through_calls(self, model):
        """A call made inside an enabled autocast region to a project function (this file or
        another module) that runs a backward pass itself or through its callees."""
        for f in model.funcs:
            for c in f.calls:
                hit = model.project_callee(c) if in_enabled_region(c.ctx) else None
                if hit is None or not hit[2].backward:
                    continue
                name = model.text(c.node.func)
                yield self.diagnostic(
                    model, c.node,
                    f"`{name}()` runs `backward()` and is called inside an autocast region; call it after the "
                    f"`with` block (run only the forward pass and the loss under autocast)",
                    None, c.stmt,
                )

    def _under_inherited_autocast(self, model):
        """A method of this class that a base class (another module, project mode) calls
        inside an autocast region, ``with autocast(...): self.step(data)`` in
        ``BaseTrainer.iterate()``, and that runs ``backward()`` outside any region of its own:
        the backward still runs under the base's autocast."""
        for f, bmeth, name, where, _kind in inherited_regions(model):
            for e in f.events:
                if e.kind not in ("backward", "framework_backward") or e.ctx.autocasts:
                    continue
                if any(lit.key and not lit.pol and amp_ish(lit.key) for lit in e.ctx.lits):
                    continue  # the branch without AMP: the base's autocast is likely off there too
                what = "backward()" if e.kind == "backward" else f"{model.text(e.node.func)}()"
                yield self.diagnostic(
                    model, e.node,
                    f"`{what}` runs inside an autocast region: `{bmeth}()` ({where}) calls `self.{name}()` "
                    f"inside `autocast`; run only the forward pass and the loss under autocast",
                    None, e.stmt,
                )

    def _fix(self, model, e, region):
        w = region.with_node
        if not isinstance(w, ast.With) or len(w.items) != 1:
            return None
        body = w.body
        if e.stmt not in body:
            return None
        idx = body.index(e.stmt)
        if idx == 0 or body[0].lineno == w.lineno or body[idx - 1].end_lineno >= e.stmt.lineno:
            return None  # a one-line `with`, or the backward shares its line with an earlier statement
        moved = body[idx:]
        safe = True
        event_nodes = {id(ev.node) for ev in e.func.events}
        if _computes(e.stmt, event_nodes):
            return None  # the backward's own statement runs the forward: moving it changes its precision
        for s in moved:
            kinds = {ev.kind for ev in e.func.events if ev.stmt is s}
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and kinds and kinds <= _MOVABLE):
                safe = False
            elif _computes(s, event_nodes):
                safe = False
        return Fix(
            "safe" if safe else "unsafe",
            "Move the backward pass (and what follows it) out of the autocast block",
            (MoveOutOfWith(stmt_anchor(model, w), stmt_anchor(model, e.stmt)),),
        )
