from __future__ import annotations

import ast

from amplint.model import exclusive
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled, scaler_text

HALF_DTYPES = {"torch.float16", "torch.half"}


def half_call(model, mc) -> bool:
    call = mc.node
    if mc.attr == "half":
        return not call.args and not call.keywords
    if mc.attr == "to":
        vals = list(call.args) + [k.value for k in call.keywords if k.arg == "dtype"]
        return any(model.text(v) in HALF_DTYPES for v in vals)
    return False


class HalfModelWithScaler(Rule):
    code = "AMP202"
    name = "half-model-with-scaler"
    summary = "`model.half()` on a model whose optimizer is stepped by a GradScaler"
    docs = """
## What it does
Checks for `model.half()` or `model.to(torch.float16)` on a model whose optimizer (built
from `model.parameters()` in the same file) is stepped through `GradScaler.step`.

## Why is this bad?
The GradScaler refuses fp16 gradients: the first `scaler.step` (or `unscale_`) raises
`ValueError: Attempting to unscale FP16 gradients.`, with or without autocast on top.
Mixed precision keeps the weights in fp32 and lets autocast run the forward pass in fp16;
the scaler protects fp32 gradients from underflowing fp16 activations.

Not reported: a copy cast for export (`copy.deepcopy(model).half()`), tensors, models whose
optimizer is not stepped by a scaler, and casts in a branch exclusive with the scaler.

## Example
```python
model = Net().cuda().half()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
```

Use instead:
```python
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
# ... with torch.autocast("cuda", dtype=torch.float16): loss = ...
```
"""
    valid = [
        """
import torch
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
export = copy.deepcopy(model).half()
x = x.half()
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        # half only when the scaler is not used
        """
import torch
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if args.fp16:
    model.half()
else:
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
""",
        # an inference model
        """
import torch
teacher = Net().half()
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(teacher(x))).backward()
    scaler.step(optimizer)
    scaler.update()
""",
    ]
    invalid = [
        Invalid(
            """
import torch
model = Net().cuda()
model.half()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        Invalid(
            """
import torch
def train(model, loader):
    model = model.to(dtype=torch.float16)
    opt = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        scaler.update()
""",
        ),
    ]

    def check(self, model):
        steps = list(model.events("step"))
        if not steps:
            return
        opt_ctors = [c for c in model.qual_calls if (c.qualname or "").startswith("torch.optim.") and isinstance(c.stmt, ast.Assign)]
        if not opt_ctors:
            return
        for f in model.funcs:
            for mc in f.methods:
                if not mc.called or mc.attr not in ("half", "to") or not isinstance(mc.receiver_node, (ast.Name, ast.Attribute)):
                    continue
                if not half_call(model, mc):
                    continue
                r = model.text(mc.receiver_node)
                for oc in opt_ctors:
                    if oc.func is not f and not any(s.func is f for s in steps):
                        continue
                    if not any(f"{r}.parameters(" in model.text(a) for a in oc.node.args[:1]):
                        continue
                    opt = model.text(oc.stmt.targets[0])
                    s = next(
                        (s for s in steps if s.optimizer == opt and s.co_occurs(mc) and not scaler_disabled(model, s.scaler)),
                        None,
                    )
                    if s is None:
                        continue
                    if any(
                        a.kind == "ctor" and a.func is f and exclusive(a.ctx.lits, mc.ctx.lits)
                        for a in model.assigns.get(s.scaler, ())
                    ):
                        continue
                    st = scaler_text(model, s.func, s.scaler)
                    yield self.diagnostic(
                        model,
                        mc.node,
                        f"`{model.text(mc.node)}` makes the gradients fp16 but `{opt}` is stepped by `{st}`, which raises "
                        f"\"ValueError: Attempting to unscale FP16 gradients.\"; keep the model in fp32 and use autocast",
                        None,
                        mc.stmt,
                    )
                    break
