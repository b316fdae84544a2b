from __future__ import annotations

import ast

from amplint.core import cfg
from amplint.core.typestate import ScalerStates
from amplint.model.queries_extra import contains, enclosing_loops, exclusive_stmts, jumps
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
function (the scaler is not stepped again), the final `return` of a step helper whose update
is guarded by a test on its own parameters (`if optimizer_idx + 1 == num_optimizers:
scaler.update()`, called once per optimizer: the caller's arguments decide), and
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
        # a step helper called once per optimizer: the update after the last one is the caller's choice
        """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def _optimize(self, loss, optimizer, optimizer_idx, num_optimizers):
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        if optimizer_idx is None or optimizer_idx + 1 == num_optimizers:
            self.scaler.update()
        return loss
""",
        # the update runs only with AMP on; with it off the scaler is disabled (a no-op)
        """
import torch
def train(loader, model, opt, use_amp):
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        if use_amp:
            scaler.update()
        if bad(x):
            continue
        log(x)
""",
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def train(loader, model, opt):
    for i, x in enumerate(loader):
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        if scaler.is_enabled():
            scaler.update()
        if i > 10:
            break
        log(x)
""",
        # the AMP switch is tested twice; the update is under the same test as the step
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def train(loader, model, opt, use_amp):
    for x in loader:
        if use_amp:
            scaler.scale(model(x)).backward()
            scaler.step(opt)
        else:
            model(x).backward()
            opt.step()
        if use_amp:
            scaler.update()
        if bad(x):
            continue
""",
        # a helper handed the scaler runs between the step and the jump (it may update)
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def train(loader, model, opt):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        finish(scaler)
        if bad(x):
            continue
        scaler.update()
""",
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
        # the step under the AMP switch, the skip on every path: when AMP is on, it skips the update
        Invalid(
            """
import torch
def train(loader, model, opt, use_amp):
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    for x in loader:
        scaler.scale(model(x)).backward()
        if use_amp:
            scaler.step(opt)
        else:
            opt.step()
        if bad(x):
            continue
        scaler.update()
""",
        ),
        # the skip in an except handler
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
def train(loader, model, opt):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        try:
            log(x)
        except ValueError:
            continue
        scaler.update()
""",
        ),
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
        """A jump on entry to which, on every path, this scaler's iteration is open (the core's
        typestate: stepped or unscaled, not updated, nothing unknown touched it), in an
        iteration that does update it later (else AMP001 speaks), and that leaves the
        iteration while the scaler lives on to be stepped again."""
        for f in model.funcs:
            keys = {s.scaler for s in f.events if s.kind in ("step", "unscale") and s.scaler is not None}
            keys = [k for k in keys if not scaler_disabled(model, k) and not any(
                u.ctx.in_finally for u in f.events if u.kind == "update" and u.scaler == k)]
            js = jumps(model, f) if keys else ()
            if not js:
                continue
            graph = cfg.of(f)
            for key in sorted(keys, key=repr):
                states = ScalerStates(model, f, key, graph)
                for j in js:
                    st = states.open_on_entry(j)  # not closed by the jump itself (`return scaler.update()`)
                    if st is None:
                        continue
                    s = st.event
                    ups = [
                        u for u in f.events
                        if u.kind == "update" and u.scaler == key and u.seq > s.seq and same_iteration(model, s, u)
                        and not exclusive_stmts(model, f, s.stmt, u.stmt)
                    ]
                    if not ups or not self._leaves(model, f, s, ups[0], j):
                        continue
                    if _callers_choice(f, s, ups[0], j):
                        continue
                    sc = scaler_text(model, f, key)
                    word = type(j).__name__.lower()
                    if s.kind == "step":
                        what, error = "step", "step() has already been called since the last update()."
                    else:
                        what, error = "unscale_", "unscale_() has already been called on this optimizer since the last update()."
                    yield self.diagnostic(
                        model,
                        j,
                        f"`{word}` (line {j.lineno}) skips `{sc}.update()` after `{sc}.{what}({s.optimizer or ''})` "
                        f"(line {s.node.lineno}): the next {what} raises \"RuntimeError: {error}\"; call "
                        f"`update()` before leaving",
                        None,
                        j,
                    )

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


def _callers_choice(f, s, u, j) -> bool:
    """The function's own last statement is a ``return`` and the update it skips is guarded by
    a test on the function's parameters (``if optimizer_idx + 1 == num_optimizers:
    scaler.update()`` in a helper called once per optimizer): whether that path leaves the
    iteration open depends on what the caller passes, which is not seen here."""
    import re

    body = getattr(f.node, "body", None)
    if not isinstance(j, ast.Return) or not body or body[-1] is not j:
        return False
    params = [p for p in f.params if p != f.self_name]
    for lit in u.ctx.lits - s.ctx.lits:
        if lit.key and any(re.search(rf"\b{re.escape(p)}\b", lit.key) for p in params):
            return True
    return False


def _local_scaler_of(model, f, key) -> bool:
    """The scaler is a local of ``f`` constructed there (gone once ``f`` returns)."""
    if key is None or key[0] != "L" or key[1] != f.fid:
        return False
    if model.escapes(key, f):
        return False
    return any(a.func is f for a in model.constructions(key))
