from __future__ import annotations

import ast

from amplint.core.dtypes import assign_target, casts
from amplint.model import exclusive
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled, scaler_text

class HalfModelWithScaler(Rule):
    code = "AMP202"
    severity = "error"
    name = "half-model-with-scaler"
    summary = "fp16 weights (`model.half()`, `.to(torch.float16)`, `torch_dtype=torch.float16`) stepped by a GradScaler"
    docs = """
## What it does
Checks for a model made fp16 before it is trained with a GradScaler: `model.half()`,
`model = model.cuda().half()`, `model.to(torch.float16)` / `.to(dtype=torch.half)` /
`.to(device, torch.float16)`, `model = Net(...).half()`,
`from_pretrained(..., torch_dtype=torch.float16)` (or `dtype=`), and parameters cast one by
one (`for p in model.parameters(): p.data = p.data.half()`), when an optimizer built from
that model's `parameters()` in the same file is stepped through `GradScaler.step` after the
cast.

## Why is this bad?
The GradScaler refuses fp16 gradients: the first `scaler.step` (or `unscale_`) raises
`ValueError: Attempting to unscale FP16 gradients.`, with or without autocast on top.
Mixed precision keeps the weights in fp32 and lets autocast run the forward pass in fp16;
the scaler protects fp32 gradients from underflowing fp16 activations.

Measured: `model.to(torch.float16)` and the per-parameter loop raise the same error.

Not reported: a copy cast for export (`copy.deepcopy(model).half()`), a cast after training
(for export or inference: no step of that optimizer follows it), a cast in a function that
does not train (`def export(model): model.half(); torch.onnx.export(...)`), tensors, models
whose optimizer is not stepped by a scaler, scalers constructed with `enabled=False`, and
casts in a branch exclusive with the scaler.

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
    valid += [
        # export after training
        """
import torch
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
model = model.half()
torch.onnx.export(model, x, "model.onnx")
""",
        # an export function that never steps
        """
import torch
def export(model, path):
    model = model.eval().half()
    torch.save(model.state_dict(), path)
def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
    export(model, "m.pt")
""",
        # an fp16 frozen teacher from from_pretrained; the student trains in fp32
        """
import torch
teacher = AutoModel.from_pretrained("bert-base-uncased", torch_dtype=torch.float16)
student = AutoModel.from_pretrained("bert-base-uncased")
optimizer = torch.optim.AdamW(student.parameters(), lr=1e-5)
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(student(x, teacher(x))).backward()
    scaler.step(optimizer)
    scaler.update()
""",
    ]
    invalid = [
        # chained on the construction
        Invalid(
            """
import torch
model = Net(cfg).cuda().half()
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
model = model.cuda().half()
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
class Trainer:
    def __init__(self, name):
        self.model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        self.scaler = torch.amp.GradScaler("cuda")

    def train_step(self, batch):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = self.model(**batch).loss
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        ),
        # parameters cast one by one
        Invalid(
            """
import torch
model = Net()
for p in model.parameters():
    p.data = p.data.half()
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
def main():
    model = Net().to(device, torch.float16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    fit(model, optimizer, scaler)
def fit(model, optimizer, scaler):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
""",
        ),
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
        steps = [s for s in model.events("step") if not scaler_disabled(model, s.scaler)]
        if not steps:
            return
        opt_ctors = [
            c for c in model.qual_calls
            if (c.qualname or "").startswith("torch.optim.") and "lr_scheduler" not in (c.qualname or "")
            and assign_target(c.stmt) is not None
        ]
        if not opt_ctors:
            return
        seen = set()
        for cast in casts(model):
            if id(cast.node) in seen:
                continue
            r = cast.r
            for oc in opt_ctors:
                params = list(oc.node.args[:1]) + [k.value for k in oc.node.keywords if k.arg == "params"]
                if not any(f"{r}.parameters(" in model.text(a) or f"{r}.named_parameters(" in model.text(a) for a in params):
                    continue
                opt = model.text(assign_target(oc.stmt))
                s = next((s for s in steps if s.optimizer == opt and self._trains_after(model, cast, s, opt)), None)
                if s is None:
                    continue
                if any(
                    a.kind == "ctor" and a.func is cast.func and exclusive(a.ctx.lits, cast.ctx.lits)
                    for a in model.assigns.get(s.scaler, ())
                ):
                    continue
                st = scaler_text(model, s.func, s.scaler)
                seen.add(id(cast.node))
                yield self.diagnostic(
                    model,
                    cast.node,
                    f"`{model.text(cast.node)}` makes the weights and gradients of `{r}` fp16 but `{opt}` is stepped by "
                    f"`{st}`, which raises \"ValueError: Attempting to unscale FP16 gradients.\"; keep the model in "
                    f"fp32 and use autocast",
                    None,
                    cast.stmt,
                )
                break

    @staticmethod
    def _trains_after(model, cast, s, opt) -> bool:
        """Does the optimizer step run after the cast (an export/inference cast after training
        is fine)?"""
        f = cast.func
        if s.func is f:
            if not s.co_occurs(cast):
                return False
            return cast.seq < s.seq or any(lp in s.loops for lp in cast.ctx.loops)
        if f.name == "__init__" and f.cls is not None and s.func.cls is f.cls:
            return True
        nodes = list(ast.walk(cast.node))
        target = assign_target(cast.stmt)
        if target is not None:
            nodes.append(target)
        keys = {model.key_of_expr(n, f) for n in nodes if isinstance(n, (ast.Name, ast.Attribute))}
        for c in f.calls:
            later = c.seq > cast.seq or any(lp in c.ctx.loops for lp in cast.ctx.loops)
            if not later or exclusive(c.ctx.lits, cast.ctx.lits):
                continue
            if model.resolve_callee(c) is s.func:
                return True
            if any(k in keys or str(k[-1]) == opt.rsplit(".", 1)[-1] for _p, k in c.arg_keys):
                return True
        return False
