from __future__ import annotations

import ast

from amplint.core import cfg
from amplint.core.grads import GradStates
from amplint.diagnostics import Fix, ReplaceExpression
from amplint.model import amp_ish, exclusive
from amplint.rules import Invalid, Rule
from amplint.rules._util import plain_expr, same_iteration, scaler_disabled, scaler_text


class UnscaledBackward(Rule):
    code = "AMP005"
    severity = "error"
    name = "unscaled-backward"
    summary = "`loss.backward()` in an iteration whose optimizer is stepped by `scaler.step()`"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for a plain `loss.backward()` whose gradients are then applied by
`GradScaler.step(optimizer)` in the same iteration: on some path from the backward to the
step no `zero_grad()` and no plain `optimizer.step()` consumes them (a later scaled backward
adds to them; a `zero_grad()` on only one path, or in an `except` arm, leaves the others).

## Why is this bad?
`scaler.step` divides the gradients by the loss scale before stepping. Gradients from an
unscaled backward (`loss.backward()` or `torch.autograd.backward(loss)`) are therefore
65536x too small. With SGD-like optimizers the update is 65536x too small (measured: update
norm 1.753e-06 instead of 0.1147, ratio 1/65536) and training stalls. Adam-style optimizers
divide by the gradient's own magnitude and are scale-invariant except for `eps`: gradients
65536x too small meet `eps`, so the update shrinks where gradients are small (measured over
100 steps: Adam/AdamW with eps=1e-8 moved the weights 0.88x as far, loss 0.684 vs 0.664;
eps=1e-6: 0.23x, loss 0.858 vs 0.664). Once the scaler has scaled anything (for
logging, or in an earlier iteration) nothing raises and the scaler notices nothing; with a
fresh scaler the first step fails with `Attempted step but _scale is None.`

Not reported: a backward in the non-AMP arm of a branch (`if use_amp: ... else:
loss.backward()`), `loss = scaler.scale(loss)` followed by `loss.backward()` (already
scaled), framework backward calls (`accelerator.backward(loss)`), an unscaled warm-up
backward whose gradients are zeroed or stepped by a plain `optimizer.step()` on every path
before the scaled step, and scalers constructed with `enabled=False`.

## Example
```python
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
```

Use instead:
```python
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
```

## Fix safety
The fix rewrites `loss.backward()` to `scaler.scale(loss).backward()` (and
`torch.autograd.backward(loss)` to `torch.autograd.backward(scaler.scale(loss))`). It is safe:
`scaler.step` already divides by the scale, so the update becomes the intended one.
"""
    valid = [
        # torch.autograd.backward of the scaled loss
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    torch.autograd.backward(scaler.scale(model(x)))
    scaler.step(opt)
    scaler.update()
""",
        # canonical
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    scaler.update()
""",
        # loss = scaler.scale(loss); loss.backward()
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    loss = model(x)
    loss = scaler.scale(loss)
    loss.backward()
    scaler.step(opt)
    scaler.update()
""",
        # conditional scaling in one expression
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
for x in loader:
    loss = model(x)
    loss = scaler.scale(loss) if use_amp else loss
    loss.backward()
    scaler.step(opt)
    scaler.update()
""",
        # the non-AMP arm of a branch, tested on differently named switches
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    loss = model(x)
    if use_amp:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
""",
        # warm-up: unscaled backward, gradients zeroed before the scaled loop
        """
import torch
scaler = torch.amp.GradScaler("cuda")
model(x0).backward()
opt.zero_grad()
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    scaler.update()
""",
        # a second model trained without the scaler in the same iteration
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    probe_loss.backward()
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    scaler.update()
    probe_opt.step()
""",
        # framework backward
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    accelerator.backward(model(x))
    scaler.step(opt)
    scaler.update()
""",
        # a scaler that is switched off
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=False)
for x in loader:
    model(x).backward()
    scaler.step(opt)
    scaler.update()
""",
    ]
    invalid = [
        # a zero_grad() on one path only: the other path steps the unscaled gradients
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    aux_loss(x).backward()
    if reset:
        optimizer.zero_grad()
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(aux_loss(x)).backward()
    if reset:
        optimizer.zero_grad()
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # a step function with an attribute scaler
        Invalid(
            """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, batch):
        loss = self.compute_loss(batch)
        loss.backward(retain_graph=True)
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
            fixed="""
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, batch):
        loss = self.compute_loss(batch)
        self.scaler.scale(loss).backward(retain_graph=True)
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        ),
        # torch.autograd.backward(loss)
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    loss = loss_fn(model(x), y)
    torch.autograd.backward(loss)
    scaler.step(optimizer)
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    loss = loss_fn(model(x), y)
    torch.autograd.backward(scaler.scale(loss))
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # accumulation: each micro-batch unscaled, stepped by the scaler
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / 4).backward()
    if (i + 1) % 4 == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
            fixed=None,  # a parenthesised receiver is left to the user
        ),
    ]

    def check(self, model):
        """A plain backward whose gradients reach a ``scaler.step()`` unconsumed on some path
        (the core's gradient state: no ``zero_grad()`` nor plain ``optimizer.step()`` between),
        later in the same iteration, where no plain step consumes them and the backward is not
        the fp32 alternative of a scaled one."""
        for f in model.funcs:
            steps = [e for e in f.events if e.kind == "step" and not scaler_disabled(model, e.scaler)]
            plain = [b for b in f.events if b.kind == "backward" and not b.scaled and _loss_expr(b) is not None]
            if not steps or not plain:
                continue
            scaled = [e for e in f.events if e.kind == "backward" and e.scaled]
            kills = [e for e in f.events if e.kind in ("zero_grad", "opt_step")]
            graph = cfg.of(f)
            states = {k: GradStates(model, f, k, (), graph, plain, kills) for k in {s.scaler for s in steps}}
            for b in plain:
                s = next((s for s in steps if s.seq > b.seq and same_iteration(model, b, s)
                          and states[s.scaler].plain_reaches(b, s)), None)
                if s is None or self._already_scaled(model, f, b) or _consumed_plainly(model, f, b, s):
                    continue
                if any(exclusive(b.ctx.lits, sb.ctx.lits) for sb in scaled):
                    continue  # the non-AMP alternative of a scaled backward
                if any(lit.key and amp_ish(lit.key) for lit in b.ctx.lits - s.ctx.lits):
                    continue  # `if not use_amp: loss.backward()`
                yield self._finding(model, f, b, s)

    def _finding(self, model, f, b, s):
        recv = _loss_expr(b)
        st = scaler_text(model, f, s.scaler)
        r = model.text(recv)
        fix = None
        if plain_expr(recv):
            (r1, c1, r2, c2) = model.span(recv)
            fix = Fix("safe", f"Use `{st}.scale({r}).backward()`", (ReplaceExpression((r1, c1), (r2, c2), f"{st}.scale({r})"),))
        if b.extra.get("autograd"):
            if fix is not None:
                fix = Fix("safe", f"Use `{model.text(b.node.func)}({st}.scale({r}))`", fix.actions)
            what, use = f"`{model.text(b.node.func)}({r})`", f"`{model.text(b.node.func)}({st}.scale({r}))`"
        else:
            what, use = f"`{r}.backward()`", f"`{st}.scale({r}).backward()`"
        return self.diagnostic(
            model, b.node,
            f"{what} is not scaled but `{st}.step()` divides the gradients by the loss scale (SGD-like "
            f"updates 65536x too small; Adam-style updates shrink where the tiny gradients meet eps); use {use}",
            fix, b.stmt,
            why=((b.node.lineno, "plain backward: its gradients are not multiplied by the scale"),
                 (s.node.lineno, "`step()` of the scaler reached with them on some path (the core's gradient state), "
                                 "no `zero_grad()` nor plain `optimizer.step()` between")),
        )

    @staticmethod
    def _already_scaled(model, f, b) -> bool:
        recv = _loss_expr(b)
        if "scale" in model.text(recv).lower():
            return True
        key = model.key_of_expr(recv, f) if isinstance(recv, (ast.Name, ast.Attribute)) else None
        if key is None:
            return False
        prior = [a for a in model.assigns.get(key, ()) if a.func is f and a.seq < b.seq]
        for a in prior[-1:]:
            if a.value is not None:
                for n in ast.walk(a.value):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "scale":
                        return True
        return False


def _consumed_plainly(model, f, b, s) -> bool:
    """A plain ``optimizer.step()`` later in the iteration steps these gradients (a second,
    fp32 optimizer of its own loss)."""
    loop = model.iteration_loop(s)
    return any(p.kind == "opt_step" and p.seq > b.seq and p.co_occurs(b) and (loop is None or loop in p.loops) for p in f.events)


def _loss_expr(b):
    """The loss of a backward event: ``loss`` in ``loss.backward()`` and in
    ``torch.autograd.backward(loss)``; None for other shapes."""
    call = b.node
    if not isinstance(call, ast.Call):
        return None
    if b.extra.get("autograd"):
        if call.args and not isinstance(call.args[0], ast.Starred):
            return call.args[0]
        for kw in call.keywords:
            if kw.arg == "tensors":
                return kw.value
        return None
    if isinstance(call.func, ast.Attribute):
        return call.func.value
    return None
