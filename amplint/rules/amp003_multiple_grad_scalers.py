from __future__ import annotations

import ast

from amplint.core.typestate import scalers_sharing_an_optimizer
from amplint.diagnostics import Fix, ReplaceExpression, ReplaceStatement
from amplint.rules import Invalid, Rule
from amplint.rules._util import is_simple_call_stmt, receiver_text, stmt_anchor


class MultipleGradScalers(Rule):
    code = "AMP003"
    severity = "error"
    name = "multiple-grad-scalers"
    summary = "Two or more GradScalers drive the same optimizer"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for two or more `GradScaler`s that step the same optimizer in one iteration, or
that scale losses whose gradients are stepped by a single optimizer.

Independent scalers for independent optimizers (a GAN's generator and discriminator, each
stepped and updated once) are not reported.

## Why is this bad?
PyTorch's recipe is one scaler per run, shared by every loss and optimizer. With two, the
optimizer runs `step()` twice per iteration, and the second run sees gradients that were
unscaled twice. With SGD+momentum 0.9 that meant 10 optimizer steps instead of 5 and an
update norm of 1.2455 instead of 1.0117 (Adam: 1.0964 vs 0.78509): the model silently
trains differently. Nothing raises.

## Example
```python
scaler1 = torch.amp.GradScaler("cuda")
scaler2 = torch.amp.GradScaler("cuda")
scaler1.scale(loss1).backward()
scaler2.scale(loss2).backward()
scaler1.step(optimizer)
scaler2.step(optimizer)
scaler1.update()
scaler2.update()
```

Use instead:
```python
scaler = torch.amp.GradScaler("cuda")
scaler.scale(loss1).backward()
scaler.scale(loss2).backward()
scaler.step(optimizer)
scaler.update()
```

## Fix safety
The fix routes every use of the extra scalers to the first one, deletes the extra
constructions, and keeps exactly one `step` per optimizer and one `update` after the last
step. It is unsafe: checkpoints that stored each scaler's `state_dict()` change keys and
values, and the numerics change (that is the point).
"""
    fix_availability = "sometimes"
    valid = [
        # GAN: independent scalers for independent optimizers
        """
import torch
scaler_g = torch.amp.GradScaler("cuda")
scaler_d = torch.amp.GradScaler("cuda")
for x in loader:
    scaler_d.scale(d_loss(x)).backward()
    scaler_d.step(opt_d)
    scaler_d.update()
    scaler_g.scale(g_loss(x)).backward()
    scaler_g.step(opt_g)
    scaler_g.update()
""",
        # one scaler chosen by device in exclusive branches
        """
import torch
cuda_scaler = torch.amp.GradScaler("cuda")
cpu_scaler = torch.amp.GradScaler("cpu")
for x in loader:
    if on_cuda:
        cuda_scaler.scale(model(x)).backward()
        cuda_scaler.step(opt)
        cuda_scaler.update()
    else:
        cpu_scaler.scale(model(x)).backward()
        cpu_scaler.step(opt)
        cpu_scaler.update()
""",
        # one scaler, two losses, two optimizers (the recipe)
        """
import torch
scaler = torch.amp.GradScaler("cuda")
scaler.scale(loss0).backward()
scaler.scale(loss1).backward()
scaler.step(optimizer0)
scaler.step(optimizer1)
scaler.update()
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler1 = torch.amp.GradScaler("cuda")
scaler2 = torch.amp.GradScaler("cuda")
for x in loader:
    scaler1.scale(loss1(x)).backward()
    scaler2.scale(loss2(x)).backward()
    scaler1.step(optimizer)
    scaler2.step(optimizer)
    scaler1.update()
    scaler2.update()
""",
            fixed="""
import torch
scaler1 = torch.amp.GradScaler("cuda")
for x in loader:
    scaler1.scale(loss1(x)).backward()
    scaler1.scale(loss2(x)).backward()
    scaler1.step(optimizer)
    scaler1.update()
""",
            unsafe=True,
        ),
        # two scalers scale losses into one optimizer that only one of them steps
        Invalid(
            """
from torch.amp import GradScaler
class Trainer:
    def __init__(self):
        self.scaler = GradScaler("cuda")
        self.aux_scaler = GradScaler("cuda")
    def step(self, x):
        self.scaler.scale(self.loss(x)).backward()
        self.aux_scaler.scale(self.aux_loss(x)).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
            fixed="""
from torch.amp import GradScaler
class Trainer:
    def __init__(self):
        self.scaler = GradScaler("cuda")
    def step(self, x):
        self.scaler.scale(self.loss(x)).backward()
        self.scaler.scale(self.aux_loss(x)).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
            unsafe=True,
        ),
    ]

    def check(self, model):
        reported: set = set()
        for f in model.funcs:
            group = scalers_sharing_an_optimizer(f)
            if group is None:
                continue
            if not any(model.constructions(k) for k in group):
                continue  # nothing constructed here: scalers handed in by callers
            group.sort(key=lambda k: min((a.seq for a in model.constructions(k)), default=0))
            first, extras = group[0], group[1:]
            for extra in extras:
                if (first, extra) in reported:
                    continue
                reported.add((first, extra))
                ctor = model.constructions(extra)
                node = (ctor[0].value or ctor[0].node) if ctor else next(e.node for e in f.events if e.scaler == extra)
                stmt = ctor[0].stmt if ctor else None
                first_name = self._name(model, first, f)
                extra_name = self._name(model, extra, f)
                yield self.diagnostic(
                    model,
                    node,
                    f"second GradScaler `{extra_name}` drives the same optimizer as `{first_name}`; "
                    f"use one scaler per run (the optimizer steps twice per iteration)",
                    self._fix(model, f, first, extras, first_name),
                    stmt,
                )

    @staticmethod
    def _name(model, key, f) -> str:
        for e in model.events():
            if e.scaler == key and isinstance(e.node, ast.Call) and isinstance(e.node.func, ast.Attribute):
                return receiver_text(model, e.node)
        return str(key[-1])

    def _fix(self, model, f, first, extras, first_name):
        actions = []
        # delete extra constructions
        for extra in extras:
            for a in model.constructions(extra):
                s = a.stmt
                if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
                    return None
                actions.append(ReplaceStatement(stmt_anchor(model, s), ""))
        evs = [e for e in f.events if e.scaler in (first, *extras) and e.kind in ("step", "update", "scale", "unscale", "backward", "scaler_state")]
        last_step: dict[str, object] = {}
        for e in evs:
            if e.kind == "step":
                last_step[e.optimizer] = e
        updates = [e for e in evs if e.kind == "update"]
        keep_update = updates[-1] if updates else None
        if keep_update is not None and last_step and max(s.seq for s in last_step.values()) > keep_update.seq:
            return None
        deleted = set()
        for e in evs:
            drop = (e.kind == "step" and last_step.get(e.optimizer) is not e) or (
                e.kind == "update" and e is not keep_update
            )
            if drop:
                if not is_simple_call_stmt(e):
                    return None
                actions.append(ReplaceStatement(stmt_anchor(model, e.stmt), ""))
                deleted.add(id(e.stmt))
        # rename the remaining uses of the extra scalers
        for fn in model.funcs:
            for mc in fn.methods:
                if mc.receiver in extras and id(mc.stmt) not in deleted:
                    if any(id(mc.stmt) == id(a.stmt) for x in extras for a in model.constructions(x)):
                        continue
                    r, c, er, ec = model.span(mc.receiver_node)
                    actions.append(ReplaceExpression((r, c), (er, ec), first_name))
        return Fix("unsafe", f"Use `{first_name}` for every loss and optimizer", tuple(actions))
