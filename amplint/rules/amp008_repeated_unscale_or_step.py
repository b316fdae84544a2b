from __future__ import annotations

from amplint.rules import Invalid, Rule
from amplint.rules._util import between, same_iteration, scaler_text


class RepeatedUnscaleOrStep(Rule):
    code = "AMP008"
    name = "repeated-unscale-or-step"
    summary = "`scaler.unscale_(opt)` or `scaler.step(opt)` twice for one optimizer before `update()`"
    docs = """
## What it does
Checks for a second `GradScaler.unscale_(optimizer)` or `GradScaler.step(optimizer)` for
the same optimizer, or an `unscale_` after its `step`, with no `update()` in between.

## Why is this bad?
The scaler keeps per-optimizer state until `update()`. torch raises:

* `unscale_` twice: `RuntimeError: unscale_() has already been called on this optimizer since the last update().`
* `step` twice: `RuntimeError: step() has already been called since the last update().`
* `unscale_` after `step`: `RuntimeError: unscale_() is being called after step().`

`unscale_` followed by `step` is the documented order and is not reported, nor are calls
in exclusive branches or on different optimizers of a loop over the optimizers.

## Example
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
clip_grad_norm_(model.parameters(), 1.0)
scaler.unscale_(optimizer)
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        # one call per optimizer in a loop over the optimizers, twice
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for opt in optimizers:
        scaler.unscale_(opt)
    clip_all()
    for opt in optimizers:
        scaler.step(opt)
    scaler.update()
""",
        # exclusive branches
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    if clip:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(optimizer)
    else:
        scaler.step(optimizer)
    scaler.update()
""",
        # a GAN: update between the two phases
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(d_loss(x)).backward()
    scaler.step(opt)
    scaler.update()
    scaler.scale(g_loss(x)).backward()
    scaler.step(opt)
    scaler.update()
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        Invalid(
            """
import torch
class T:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        if self.log_grads:
            self.scaler.unscale_(self.opt)
        self.scaler.step(self.opt)
        self.scaler.update()
""",
            count=2,
        ),
    ]

    def check(self, model):
        for f in model.funcs:
            calls = [e for e in f.events if e.kind in ("unscale", "step") and e.optimizer]
            if len(calls) < 2:
                continue
            for i, e2 in enumerate(calls):
                for e1 in calls[:i]:
                    if e1.scaler != e2.scaler or e1.optimizer != e2.optimizer:
                        continue
                    if e1.kind == "unscale" and e2.kind == "step":
                        continue
                    if not e1.co_occurs(e2) or not same_iteration(model, e1, e2) or e1.loops != e2.loops:
                        continue
                    if any(e1.optimizer in loop.targets or e1.optimizer.split(".")[0] in loop.targets for loop in e1.loops):
                        continue
                    if any(True for _ in between(f, e1, e2, ("update",))) or self._may_update_between(model, f, e1, e2):
                        continue
                    st = scaler_text(model, f, e2.scaler)
                    what = "unscale_" if e2.kind == "unscale" else "step"
                    first = "unscale_" if e1.kind == "unscale" else "step"
                    err = {
                        ("unscale", "unscale"): "unscale_() has already been called on this optimizer since the last update().",
                        ("step", "step"): "step() has already been called since the last update().",
                        ("step", "unscale"): "unscale_() is being called after step().",
                    }[(e1.kind, e2.kind)]
                    yield self.diagnostic(
                        model,
                        e2.node,
                        f"`{st}.{what}({e2.optimizer})` after `{st}.{first}({e1.optimizer})` (line {e1.node.lineno}) "
                        f"with no `update()` in between raises \"{err}\"",
                        None,
                        e2.stmt,
                    )
                    break

    @staticmethod
    def _may_update_between(model, f, e1, e2) -> bool:
        for c in f.calls:
            if not (e1.seq < c.seq < e2.seq):
                continue
            callee = model.resolve_callee(c)
            if callee is not None:
                if model.may_update(callee, e1.scaler) if callee.walked else model.mentions(callee, "update"):
                    return True
            elif any(k == e1.scaler for _p, k in c.arg_keys):
                return True
            elif e1.scaler[0] == "A" and model.calls_self_unknown(c):
                return True
        return False
