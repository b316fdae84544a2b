from __future__ import annotations

import ast

from amplint.diagnostics import Fix, InsertStatement, ReplaceStatement
from amplint.core.typestate import ScalerStates, accumulation_guard, amp_switch, skipped_step, touched_between, guard_if
from amplint.rules import Invalid, Rule
from amplint.rules._util import is_simple_call_stmt, scaler_disabled, scaler_text, stmt_anchor


def _alone(model, stmt) -> bool:
    """``stmt`` is the only thing on its (single) line (no other statement, no comment that
    removing it would lose)."""
    if stmt.lineno != stmt.end_lineno:
        return False
    return model.lines[stmt.lineno - 1].strip() == model.text(stmt).strip()


def _alone_end(model, stmt) -> bool:
    """Nothing follows ``stmt`` on its last line (no ``; other``)."""
    line = model.lines[stmt.end_lineno - 1]
    rest = line[model.char_col(stmt.end_lineno, stmt.end_col_offset):] if line.isascii() else line
    return rest.split("#", 1)[0].strip() == ""


class UpdateWithoutStep(Rule):
    code = "AMP011"
    severity = "error"
    name = "update-without-step"
    summary = "`scaler.update()` runs on iterations where `scaler.step()` did not (step under a condition, update not)"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for a `GradScaler.update()` that runs on every iteration while the iteration's
`scaler.step(optimizer)` runs only under a condition (`if i >= warmup:`, `if not skip:`,
`if torch.isfinite(loss):`), with no unconditional `scaler.unscale_()` before the update.

## Why is this bad?
`update()` reads the inf checks that `step()` (or `unscale_()`) recorded in the same
iteration. On an iteration where the condition is false nothing was recorded and torch
raises `AssertionError: No inf checks were recorded prior to update.` (measured: on the
first iteration without a step; a single skipped iteration is enough).

Not reported: steps and `unscale_()` calls under different conditions (the update raises
only when all of them are false), step and update under the same condition (also two separate `if`s with the
same test), an unconditional `unscale_()` before the condition (it records the inf checks,
measured: no error), steps in every arm of the branch, an AMP switch (`if use_amp:
scaler.step(opt) else: opt.step()`, or a condition naming AMP), scalers constructed with
`enabled=False`, gradient-accumulation guards (`if (i + 1) % accum == 0:`), which
AMP007 reports, and a step whose condition reads the variable of a loop over optimizers that
the update is not in (`for name in self.optimizers: if names and name not in names: continue`):
whether some optimizer steps is unknown.

## Example
```python
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    if i >= warmup_iters:
        scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
```

Use instead:
```python
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    if i >= warmup_iters:
        scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad()
```

## Fix safety
The fix moves the `update()` to the end of the condition's body. It is offered when the
step and the update are each a statement of their own (alone on their lines, no one-line
suite, no semicolons), the condition is a single `if` with the step directly in its body and
no `continue`/`break`/`return`/`raise` in that body, the
two sit in the same loop, and nothing between them mentions the scaler or calls a function
of this file that may reach it. It is safe: on iterations with a step the statements run in
the same order as before (nothing between them reads the scaler), and on the others the
update, which raised, no longer runs.
"""
    valid = [
        # the other arm steps through a helper handed the scaler
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def do_step(s, opt):
    s.step(opt)
def train(loader, model, opt):
    for x in loader:
        scaler.scale(model(x)).backward()
        if x.isfinite().all():
            scaler.step(opt)
        else:
            do_step(scaler, opt)
        scaler.update()
""",
        # step and update under the same condition
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    if i >= warmup:
        scaler.step(opt)
        scaler.update()
""",
        # two separate ifs with the same test
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    if not skip:
        scaler.step(opt)
    log(loss)
    if not skip:
        scaler.update()
""",
        # unscale_ unconditionally records the inf checks
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if torch.isfinite(norm):
        scaler.step(opt)
    scaler.update()
""",
        # an AMP switch
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
for x in loader:
    scaler.scale(model(x)).backward()
    if use_amp:
        scaler.step(opt)
    else:
        opt.step()
    scaler.update()
""",
        # a step in every arm
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    if i % 2 == 0:
        scaler.step(opt_a)
    else:
        scaler.step(opt_b)
    scaler.update()
""",
        # gradient accumulation guard (AMP007 reports the per-micro-batch update)
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / 4).backward()
    if (i + 1) % 4 == 0:
        scaler.step(opt)
        scaler.update()
""",
        # a disabled scaler's update is a no-op
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=False)
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    if i >= warmup:
        scaler.step(opt)
    scaler.update()
""",
        # the step's condition depends on the optimizer the inner loop is at: some item steps
        """
import torch
class Manager:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def step_optimizers(self, names=None):
        for name in self.optimizers:
            if names and name not in names:
                continue
            self.scaler.step(self.optimizers[name])
        self.scaler.update()
    def step_by_type(self):
        for key in self.optimizers:
            if self.optimizer_types[key] == "adam":
                self.scaler.step(self.optimizers[key])
            else:
                self.optimizers[key].step(self.closure)
        self.scaler.update()
""",
    ]
    invalid = [
        # a nested condition: with `clip` on and a large gap, nothing steps
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
def train(loader, model, opt, clip):
    for x in loader:
        scaler.scale(model(x)).backward()
        if clip:
            n = loss_gap(model, x)
            if n < 10:
                scaler.step(opt)
        else:
            scaler.step(opt)
        scaler.update()
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    if i >= warmup:
        scaler.step(opt)
    scaler.update()
    opt.zero_grad()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    if i >= warmup:
        scaler.step(opt)
        scaler.update()
    opt.zero_grad()
""",
        ),
        # in a method; the scale is logged in between: reported, no fix
        Invalid(
            """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def train_step(self, batch, step):
        loss = self.compute_loss(batch)
        self.scaler.scale(loss).backward()
        if not self.skip_step(step):
            self.scaler.step(self.optimizer)
        self.log(self.scaler.get_scale())
        self.scaler.update()
""",
        ),
    ]

    def check(self, model):
        states = {}  # (func id, scaler key) -> the core's typestate of that scaler in that function
        for f in model.funcs:
            for u in f.events:
                if u.kind != "update" or u.ctx.in_finally or scaler_disabled(model, u.scaler):
                    continue
                if isinstance(u.node, ast.Call) and (u.node.args or u.node.keywords):
                    # update(new_scale) sets the scale and reads no inf checks
                    continue
                key = (f.fid, u.scaler)
                if key not in states:
                    states[key] = ScalerStates(model, f, u.scaler, unseen="step")
                d = self._check_update(model, f, u, states[key])
                if d is not None:
                    yield d

    def _check_update(self, model, f, u, states):
        """An update that, under some outcome of the step's own branch tests, runs with no
        step or ``unscale_`` since the last update (the typestate is CLEAR there on every path
        consistent with those outcomes), while under another a step precedes it."""
        hit = skipped_step(states, u)
        if hit is None:
            return None
        s, g = hit
        if any(accumulation_guard(lit) for lit in g):
            return None  # AMP007
        if any(amp_switch(model, u.scaler, lit.key) for lit in g) or self._amp_switch(model, f, u, g):
            return None  # an AMP switch (with AMP off the scaler's calls are no-ops)
        st = scaler_text(model, f, u.scaler)
        cond = self._cond_text(model, f, s, g)
        msg = (
            f"`{st}.update()` runs on iterations where `{st}.step({s.optimizer or ''})` (line {s.node.lineno}) did not"
            f"{' (it runs only if `' + cond + '`)' if cond else ''}: raises "
            f"\"AssertionError: No inf checks were recorded prior to update.\"; call `update()` under the same condition"
        )
        return self.diagnostic(model, u.node, msg, self._fix(model, f, u, s, g, st), u.stmt)

    @staticmethod
    def _amp_switch(model, f, u, g) -> bool:
        """A plain ``optimizer.step()`` in another arm of the step's branch."""
        groups = {(lit.group, lit.arm) for lit in g}
        for e in f.events:
            if e.kind != "opt_step":
                continue
            for lit in e.ctx.lits:
                if any(lit.group == gr and lit.arm != arm for gr, arm in groups):
                    return True
        return False

    def _cond_text(self, model, f, s, g) -> str | None:
        node = guard_if(model, f, s, g)
        if node is not None:
            return model.text(node.test)
        return None

    def _fix(self, model, f, u, s, g, st):
        guard = guard_if(model, f, s, g)
        if guard is None or not is_simple_call_stmt(u) or not is_simple_call_stmt(s) or s.loops != u.loops:
            return None
        if not (guard.end_lineno < u.stmt.lineno):
            return None
        last = guard.body[-1]
        if any(isinstance(x, (ast.Continue, ast.Break, ast.Return, ast.Raise)) for x in guard.body):
            return None
        # statement-precise shapes only: no one-line suite, no semicolons around the two ends
        if guard.body[0].lineno == guard.lineno or not _alone(model, u.stmt) or not _alone_end(model, last):
            return None
        if touched_between(model, f, u.scaler, s.seq, u.seq):  # nothing in between may touch the scaler
            return None
        return Fix(
            "safe",
            "Move `update()` under the step's condition",
            (
                ReplaceStatement(stmt_anchor(model, u.stmt), ""),
                InsertStatement(stmt_anchor(model, last), f"{st}.update()"),
            ),
        )
