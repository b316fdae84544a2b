from __future__ import annotations

from amplint.diagnostics import Fix
from amplint.model.names import dotted
from amplint.rules import Invalid, Rule


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

apex imported as an optional dependency (`try: from apex import amp` / `except ImportError:`)
is not reported: that code offers apex as one backend among others.

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
        # an optional backend: guarded import
        """
try:
    from apex import amp
except ImportError:
    amp = None
def backward(loss, optimizer):
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
""",
    ]
    invalid = [
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
        for r in model.refs:
            q = r.qualname
            if not (q == "apex.amp" or q.startswith("apex.amp.")) or r.role not in ("call", "decorator"):
                continue
            if r.ctx.guarded or (dotted(r.node) or [""])[0] in optional:
                continue
            what = q[len("apex."):]
            fix = Fix(
                "display-only",
                "Replace apex.amp with torch.autocast + torch.amp.GradScaler (scaler.scale(loss).backward(), "
                "scaler.step(optimizer), scaler.update())",
                (),
            )
            yield self.diagnostic(
                model,
                r.node,
                f"`{what}` is NVIDIA apex's deprecated AMP API; use native `torch.autocast` and `torch.amp.GradScaler`",
                fix,
                r.stmt,
            )
