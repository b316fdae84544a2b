from __future__ import annotations

import ast

from amplint.model.queries_extra import ancestry, contains, end_pos, enclosing_loops, exclusive_stmts, jumps, pos
from amplint.rules import Invalid, Rule
from amplint.rules._util import same_iteration, scaler_disabled, scaler_text


class JumpBetweenStepAndUpdate(Rule):
    code = "AMP012"
    severity = "error"
    name = "jump-between-step-and-update"
    summary = "`continue`/`break`/`return` on a path between `scaler.step()` and `scaler.update()`"
    docs = """
## What it does
Checks for a `continue`, `break` or `return` that can run after `scaler.step(optimizer)` (or
`scaler.unscale_(optimizer)`) and before the iteration's `scaler.update()`, skipping the
update on that path: placed between them, or in the other arm of an `if` whose arm updates
(`if math.isfinite(norm): step; update` / `else: return`).

## Why is this bad?
The scaler keeps the optimizer's "stepped" state until `update()`. When an iteration steps
but skips the update, the next iteration's step raises
`RuntimeError: step() has already been called since the last update().` (with `unscale_`
first: `RuntimeError: unscale_() is being called after step().`). After an `unscale_` with
no update, the next `unscale_` raises `RuntimeError: unscale_() has already been called on
this optimizer since the last update().`: a skip on a non-finite gradient norm, which fp16
overflow produces, crashes the run at the first overflow. Measured: `continue` after
the step raises on the next iteration; `break` out of the batch loop raises in the next
epoch; `return` from a per-iteration step function raises on the next call.

Not reported: a jump inside a nested loop that stays inside the iteration (`for p in
params: ... continue`), a jump in a branch exclusive with the step, a path that calls
`update()` (or a helper of this file that may) before jumping, jumps in an `except`
handler of a `try` around the step, a `break` that ends the only loop of a
script or of a function whose scaler is a local built there, a `return` from such a
function (the scaler is not stepped again), and
scalers constructed with `enabled=False`.

## Example
```python
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    if not log_this_step:
        continue
    log(loss)
    scaler.update()
```

Use instead:
```python
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    if not log_this_step:
        continue
    log(loss)
```

## Fix safety
No fix: where the update belongs depends on what the skipped code does.
"""
    valid = [
        # a jump in a nested loop over the parameters
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    for p in model.parameters():
        if p.grad is None:
            continue
        stats(p)
    scaler.update()
""",
        # the update runs before the jump
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    if i % 100:
        scaler.update()
        continue
    log_images(model)
    scaler.update()
""",
        # the jump comes before the step
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    loss = model(x)
    if not torch.isfinite(loss):
        continue
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""",
        # the jump is in the non-AMP arm
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    if use_amp:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
    else:
        model(x).backward()
        opt.step()
        continue
    scaler.update()
""",
        # break ends training; the local scaler is never stepped again
        """
import torch
def train(model, loader, opt, max_steps):
    scaler = torch.amp.GradScaler("cuda")
    for i, x in enumerate(loader):
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        if i == max_steps:
            break
        scaler.update()
""",
        # a script whose only loop ends with the break
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    if i >= max_iters:
        break
    scaler.update()
""",
        # the skip path updates before leaving (the scale backs off)
    """
import math, torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        if math.isfinite(norm):
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return True
        else:
            self.scaler.update()
            return False
""",
    ]
    invalid = [
        # unscale_, then a skip branch that leaves without update(): the next unscale_ raises
        Invalid(
            """
import math, torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        if math.isfinite(norm):
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return True
        else:
            return False
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    if i % log_every:
        continue
    log(loss)
    scaler.update()
""",
        ),
        # return from a per-iteration step function
        Invalid(
            """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def train_step(self, batch):
        loss = self.model(batch)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        if not self.is_main:
            return loss
        self.log(loss)
        self.scaler.update()
        return loss
""",
        ),
        # break in the batch loop, inside the epoch loop
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for epoch in range(epochs):
    for i, x in enumerate(loader):
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        if i == steps_per_epoch:
            break
        scaler.update()
""",
        ),
    ]

    def check(self, model):
        for f in model.funcs:
            js = None
            for s in f.events:
                if s.kind not in ("step", "unscale") or scaler_disabled(model, s.scaler):
                    continue
                ups = [
                    u for u in f.events
                    if u.kind == "update" and u.scaler == s.scaler and u.seq > s.seq and same_iteration(model, s, u)
                    and not exclusive_stmts(model, f, s.stmt, u.stmt) and not u.ctx.in_finally
                ]
                if not ups:
                    continue
                if any(u.ctx.in_finally for u in f.events if u.kind == "update" and u.scaler == s.scaler):
                    continue
                u = ups[0]
                if js is None:
                    js = jumps(model, f)
                for j in js:
                    if end_pos(s.stmt) > pos(j):
                        continue
                    if end_pos(j) > pos(u.stmt) and not self._other_arm(model, f, j, ups):
                        continue
                    if exclusive_stmts(model, f, s.stmt, j):
                        continue
                    if not self._leaves(model, f, s, u, j):
                        continue
                    if self._updates_before(model, f, s, j):
                        continue
                    st = scaler_text(model, f, s.scaler)
                    word = type(j).__name__.lower()
                    if s.kind == "step":
                        what, error = "step", "step() has already been called since the last update()."
                    else:
                        what, error = "unscale_", "unscale_() has already been called on this optimizer since the last update()."
                    yield self.diagnostic(
                        model,
                        j,
                        f"`{word}` (line {j.lineno}) skips `{st}.update()` after `{st}.{what}({s.optimizer or ''})` "
                        f"(line {s.node.lineno}): the next {what} raises \"RuntimeError: {error}\"; call "
                        f"`update()` before leaving",
                        None,
                        j,
                    )
                    break


    @staticmethod
    def _other_arm(model, f, j, ups) -> bool:
        """Is the jump in the other arm of an ``if`` from every update (``if ok: step; update``
        / ``else: return``)? Not in an ``except`` handler (a failure path, left alone)."""
        if any(isinstance(owner, ast.ExceptHandler) for owner, _f, _i in ancestry(model, f, j)):
            return False
        return all(exclusive_stmts(model, f, u.stmt, j) for u in ups)

    @staticmethod
    def _leaves(model, f, s, u, j) -> bool:
        """Does the jump leave the stretch between the step and the update, and will the scaler
        be stepped again afterwards?"""
        loops = enclosing_loops(model, f, j)
        if isinstance(j, (ast.Continue, ast.Break)):
            if not loops:
                return False
            inner = loops[0]
            if not (contains(inner, s.stmt) and contains(inner, u.stmt)):
                return False  # a loop nested between the step and the update
            if isinstance(j, ast.Continue):
                return True
            outer = loops[1:]
            if outer:
                return True
            # leaving the only loop: the scaler is stepped again only if it outlives this code
            # (a parameter or attribute of a function that is called again)
            if isinstance(f.node, ast.Module):
                return False
            return not _local_scaler_of(model, f, s.scaler)
        # return
        return not _local_scaler_of(model, f, s.scaler) or not enclosing_loops(model, f, s.stmt)

    @staticmethod
    def _updates_before(model, f, s, j) -> bool:
        for e in f.events:
            if e.kind == "update" and e.scaler == s.scaler and e.seq > s.seq and pos(e.stmt) < pos(j):
                if not exclusive_stmts(model, f, e.stmt, j):
                    return True
        for c in f.calls:
            if c.seq <= s.seq or pos(c.stmt) >= pos(j) or exclusive_stmts(model, f, c.stmt, j):
                continue
            if any(k == s.scaler for _p, k in c.arg_keys):
                return True  # a helper that receives the scaler may update it
            callee = model.resolve_callee(c)
            if callee is not None:
                if model.may_update(callee, s.scaler) if callee.walked else model.mentions(callee, "update"):
                    return True
            elif s.scaler[0] == "A" and model.calls_self_unknown(c):
                return True
        return False


def _local_scaler_of(model, f, key) -> bool:
    """The scaler is a local of ``f`` constructed there (gone once ``f`` returns)."""
    if key is None or key[0] != "L" or key[1] != f.fid:
        return False
    if model.escapes(key, f):
        return False
    return any(a.func is f for a in model.constructions(key))
