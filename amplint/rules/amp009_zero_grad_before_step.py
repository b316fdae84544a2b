from __future__ import annotations

from amplint.core import cfg
from amplint.core.grads import GradStates
from amplint.diagnostics import Fix, MoveStatement
from amplint.model.queries_extra import abandons
from amplint.rules import Invalid, Rule
from amplint.rules._util import is_simple_call_stmt, scaler_text, stmt_anchor


class ZeroGradBeforeStep(Rule):
    code = "AMP009"
    severity = "error"
    name = "zero-grad-before-step"
    summary = "`optimizer.zero_grad()` between the scaled backward and `scaler.step(optimizer)`"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for `optimizer.zero_grad()` between `scaler.scale(loss).backward()` and
`scaler.step(optimizer)` of the same iteration.

## Why is this bad?
The gradients the backward just produced are erased before the step uses them. With
`zero_grad(set_to_none=True)` (the default since torch 2.0) `scaler.step` then raises
`AssertionError: No inf checks were recorded for this optimizer.`; with
`set_to_none=False` the step silently applies zero gradients (momentum and weight decay
still move the weights) and the model does not learn.

`zero_grad()` at the top of the iteration (before the backward) or after the step is the
canonical order and is not reported, nor is one followed, before the step, by a fresh scaled
backward or a call to a project function that back-propagates. `model.zero_grad()` is not
reported either: with several models (a GAN) zeroing another model's gradients there is correct.

## Example
```python
scaler.scale(loss).backward()
optimizer.zero_grad()
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
optimizer.zero_grad()
```

## Fix safety
The fix moves the `zero_grad()` call after the iteration's `scaler.update()` (or
`scaler.step()`), in the same block. It is unsafe: code between the step and the end of
the iteration that reads the gradients (logging gradient norms) now sees them, and a
`zero_grad()` that was meant for the next iteration's first micro-batch moves with it.
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        # accumulation: zero after the step under the guard
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / 4).backward()
    if (i + 1) % 4 == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        # GAN: another model's gradients zeroed between D's backward and D's step
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(d_loss(x)).backward()
    netG.zero_grad()
    scaler.step(opt_d)
    scaler.scale(g_loss(x)).backward()
    scaler.step(opt_g)
    scaler.update()
""",
        # another optimizer zeroed
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(loss_a(x)).backward()
    opt_b.zero_grad()
    scaler.step(opt_a)
    scaler.update()
""",
        # a deliberate skip: drop the gradients, close the scaler iteration, leave the loop
    """
import torch
class Trainer:
    def __init__(self):
        self.scaler_G = torch.amp.GradScaler("cuda")
    def gen_update(self, data):
        update_finished = False
        while not update_finished:
            with torch.autocast("cuda"):
                total_loss = self.gen_forward(data)
            self.opt_G.zero_grad(set_to_none=True)
            self.scaler_G.scale(total_loss).backward()
            self.scaler_G.unscale_(self.opt_G)
            total_norm = torch.nn.utils.clip_grad_norm_(self.net_G.parameters(), 1.0)
            if total_norm > 100:
                self.opt_G.zero_grad(set_to_none=True)
                self.scaler_G.step(self.opt_G)
                self.scaler_G.update()
                break
            self.scaler_G.step(self.opt_G)
            self.scaler_G.update()
            update_finished = True
""",
    # an out-of-memory handler drops the batch's partial gradients and moves on
    """
import torch
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    try:
        with torch.autocast("cuda"):
            loss = model(batch)
        scaler.scale(loss).backward()
    except RuntimeError as e:
        if "CUDA out of memory" in str(e):
            torch.cuda.empty_cache()
            optimizer.zero_grad()
            continue
        raise
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.zero_grad()
    scaler.step(optimizer)
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
""",
            unsafe=True,
        ),
        # in a step method, zero_grad between unscale_/clip and step
        Invalid(
            """
import torch
class T:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        if self.reset:
            self.optimizer.zero_grad()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        ),
    ]

    def check(self, model):
        for f in model.funcs:
            zs = [z for z in f.events if z.kind == "zero_grad" and model.is_optimizer(z.node.func.value, f)]
            keys = {e.scaler for e in f.events if e.kind == "backward" and e.scaled} if zs else ()
            graph = cfg.of(f) if keys else None
            seen = set()
            for key in sorted(keys, key=str):
                states = GradStates(model, f, key, zs, graph)
                steps = [e for e in f.events if e.kind == "step" and e.scaler == key and e.optimizer]
                for z in zs:
                    # the zero_grad's erasure of scaled gradients reaches a step of its optimizer
                    # (no fresh backward in between); `zero_grad(); step(); update(); break` skips
                    # this iteration on purpose
                    s = next((s for s in steps if s.seq > z.seq and s.optimizer == z.optimizer and states.reaches(z, s)), None)
                    if s is None or id(z) in seen or abandons(model, f, z.stmt):
                        continue
                    seen.add(id(z))
                    st = scaler_text(model, f, key)
                    yield self.diagnostic(
                        model,
                        z.node,
                        f"`{z.optimizer}.zero_grad()` erases the gradients of the scaled backward before "
                        f"`{st}.step({s.optimizer})` uses them; zero the gradients at the start of the iteration or after the step",
                        self._fix(model, f, z, s),
                        z.stmt,
                        why=((z.node.lineno, "clears the gradients of a scaled backward (the core's gradient state)"),
                             (s.node.lineno, f"`step({s.optimizer})` of the scaler reached after it, no fresh backward between")),
                    )

    @staticmethod
    def _fix(model, f, z, s):
        if not is_simple_call_stmt(z) or z.loops != s.loops or z.ctx.lits != s.ctx.lits:
            return None
        anchor = s
        for u in f.events:
            if u.kind == "update" and u.scaler == s.scaler and u.seq > s.seq and u.loops == s.loops and u.ctx.lits == s.ctx.lits:
                anchor = u
                break
        if not is_simple_call_stmt(anchor):
            return None
        return Fix(
            "unsafe",
            f"Move `{z.optimizer}.zero_grad()` after the step",
            (MoveStatement(stmt_anchor(model, z.stmt), stmt_anchor(model, anchor.stmt)),),
        )
