from __future__ import annotations

from amplint.model import CERTAIN
from amplint.model.names import GRAD_SCALER_API
from amplint.rules import Invalid, Rule

OVERFLOW_WORDS = ("overflow", "inf", "nan", "skip", "found")


class UnknownGradScalerAttribute(Rule):
    code = "AMP102"
    severity = "error"
    name = "unknown-grad-scaler-attribute"
    summary = "An attribute `torch.amp.GradScaler` does not have (`scaler.check_overflow()`)"
    docs = """
## What it does
Checks for a public attribute or method that `torch.amp.GradScaler` does not have, used on
a name that certainly holds a torch `GradScaler` (it is constructed from
`torch.amp.GradScaler`, `torch.cuda.amp.GradScaler` or FSDP's `ShardedGradScaler` in the
same file, or annotated as one).

## Why is this bad?
It raises `AttributeError`, often only on a rarely taken path, for example
`AttributeError: 'GradScaler' object has no attribute 'check_overflow'`. Such calls are
usually carried over from other loss scalers (apex, fairseq, DeepSpeed) whose APIs differ.
torch's GradScaler has `scale`, `unscale_`, `step`, `update`, `get_scale`,
`is_enabled`, `state_dict`, `load_state_dict` and the growth/backoff getters and setters.

To tell whether the last step was skipped (overflow), compare `scaler.get_scale()` before and
after `scaler.update()`: the scale drops only when the step was skipped.

Names bound to other scalers (fairseq's `DynamicLossScaler`, apex, a project's own class)
are not reported, nor private attributes (`scaler._scale`).

## Example
```python
scaler.step(optimizer)
scaler.update()
if scaler.check_overflow():
    skipped += 1
```

Use instead:
```python
scale_before = scaler.get_scale()
scaler.step(optimizer)
scaler.update()
if scaler.get_scale() < scale_before:
    skipped += 1
```
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
s = scaler.get_scale()
scaler.step(opt)
scaler.update()
print(scaler.is_enabled(), scaler._scale, scaler.state_dict())
""",
        # another library's scaler
        """
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler
scaler = DynamicLossScaler(init_scale=128)
scaler.check_overflow(grad_norm)
""",
        # a name that only looks like a scaler
        """
import torch
with torch.autocast("cuda"):
    pass
scaler.check_overflow()
""",
        # reassigned to something else
        """
import torch
scaler = torch.amp.GradScaler("cuda")
scaler = MyScaler(scaler)
scaler.check_overflow()
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
scaler.step(opt)
scaler.update()
if scaler.check_overflow():
    skipped += 1
""",
        ),
        Invalid(
            """
from torch.cuda.amp import GradScaler
class T:
    def __init__(self):
        self.scaler = GradScaler()
    def log(self):
        return self.scaler.loss_scale
""",
        ),
    ]

    def check(self, model):
        for key, uses in model._methods_by_key.items():
            if model.scaler_status(key) != CERTAIN:
                continue
            for m in uses:
                attr = m.attr
                if attr in GRAD_SCALER_API or attr.startswith("_"):
                    continue
                if any(lit.key and "hasattr" in lit.key and attr in lit.key for lit in m.ctx.lits) or m.ctx.guarded:
                    continue
                recv = model.text(m.receiver_node)
                hint = (
                    f"; to tell whether the step was skipped compare `{recv}.get_scale()` before and after `update()`"
                    if any(w in attr.lower() for w in OVERFLOW_WORDS) or attr in ("loss_scale", "cur_scale")
                    else ""
                )
                yield self.diagnostic(
                    model,
                    m.attr_node,
                    f"`torch.amp.GradScaler` has no attribute `{attr}` (AttributeError){hint}",
                    None,
                    m.stmt,
                )
