from __future__ import annotations

import ast

from amplint.model import exclusive
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled, scaler_text

HALF_DTYPES = {"torch.float16", "torch.half", "torch.HalfTensor", "torch.cuda.HalfTensor"}
HALF_STRINGS = {"float16", "fp16", "half", "torch.float16"}
# calls that return the same module (the chain root is the model): model.cuda().half()
CHAIN = {"cuda", "cpu", "to", "train", "eval", "requires_grad_", "float", "half", "type", "xpu", "mps"}


def _is_half_value(model, v) -> bool:
    if isinstance(v, ast.Constant) and isinstance(v.value, str):
        return v.value in HALF_STRINGS
    return model.text(v) in HALF_DTYPES


def half_call(model, mc) -> bool:
    call = mc.node
    if mc.attr == "half":
        return not call.args and not call.keywords
    if mc.attr in ("to", "type"):
        vals = list(call.args) + [k.value for k in call.keywords if k.arg in ("dtype", "dst_type")]
        return any(model.text(v) in HALF_DTYPES for v in vals)
    return False


def _chain_root(node):
    """``model.cuda().to(dev)`` -> ``model``; a class construction or other call -> None."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CHAIN:
        node = node.func.value
    return node if isinstance(node, (ast.Name, ast.Attribute)) else None


def _assign_target(stmt):
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Name, ast.Attribute)):
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, (ast.Name, ast.Attribute)) and stmt.value is not None:
        return stmt.target
    return None


class Cast:
    """One place that makes a module's weights fp16: ``r`` is how the module is spelled."""

    def __init__(self, r, node, stmt, func, ctx, seq):
        self.r, self.node, self.stmt, self.func, self.ctx, self.seq = r, node, stmt, func, ctx, seq


def casts(model):
    for f in model.funcs:
        for mc in f.methods:
            if not mc.called or mc.attr not in ("half", "to", "type") or not half_call(model, mc):
                continue
            root = _chain_root(mc.receiver_node)
            if root is not None:
                # parameters cast one by one: for p in model.parameters(): p.data = p.data.half()
                base = root.value if isinstance(root, ast.Attribute) and root.attr == "data" else root
                if isinstance(base, ast.Name):
                    loop = next((lp for lp in reversed(mc.ctx.loops) if base.id in lp.targets), None)
                    if loop is not None:
                        it = getattr(loop.node, "iter", None)
                        if (
                            isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                            and it.func.attr in ("parameters", "named_parameters", "modules", "children")
                            and isinstance(mc.stmt, ast.Assign)
                        ):
                            yield Cast(model.text(it.func.value), mc.node, mc.stmt, f, mc.ctx, mc.seq)
                        continue
                yield Cast(model.text(root), mc.node, mc.stmt, f, mc.ctx, mc.seq)
                continue
            # Net().half(), Net(cfg).cuda().half(): the assigned name is the model
            target = _assign_target(mc.stmt)
            if target is not None and mc.stmt.value is mc.node:
                yield Cast(model.text(target), mc.node, mc.stmt, f, mc.ctx, mc.seq)
        for c in f.calls:
            if not (isinstance(c.callee, ast.Attribute) and c.callee.attr == "from_pretrained"):
                continue
            if not any(kw.arg in ("torch_dtype", "dtype") and _is_half_value(model, kw.value) for kw in c.node.keywords):
                continue
            target = _assign_target(c.stmt)
            if target is not None:
                yield Cast(model.text(target), c.node, c.stmt, f, c.ctx, c.seq)


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
            and _assign_target(c.stmt) is not None
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
                opt = model.text(_assign_target(oc.stmt))
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
        target = _assign_target(cast.stmt)
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
