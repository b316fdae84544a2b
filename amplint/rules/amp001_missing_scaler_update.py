from __future__ import annotations

import ast

from amplint.core import cfg
from amplint.core.cfg import cycle_through
from amplint.diagnostics import Fix, InsertStatement
from amplint.core.loops import updated_after_inner_loop
from amplint.core.typestate import helper_steps
from amplint.rules import Invalid, Rule
from amplint.rules._util import receiver_text, simple_stmt, stmt_anchor


class MissingScalerUpdate(Rule):
    code = "AMP001"
    severity = "error"
    name = "missing-scaler-update"
    summary = "`scaler.step()` with no later `scaler.update()` in the iteration"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for a `GradScaler.step(optimizer)` that is reached in a training iteration with no
later `GradScaler.update()` for the same scaler.

## Why is this bad?
`update()` ends the scaler's iteration: it adjusts the loss scale and resets the
per-optimizer state. Without it the second iteration fails with
`RuntimeError: step() has already been called since the last update().` (or
`unscale_() is being called after step().` when `unscale_` comes first), and the loss scale
never adapts.

An update done elsewhere is recognised: in a `finally:` block, in another method of the
same class called from the loop, in a helper the scaler is passed to, or by the caller of
a helper that received the scaler as a parameter. Inside a loop, only what runs between one
pass's `step()` and the next pass's counts (the core's cycle through the step): an update
that runs only on a pass that then leaves the loop (`update(); break`, `update(); return`,
an `except` that re-raises) does not, and a step that every pass follows with `break` is
not repeated. A loop's call to a helper that steps the scaler it is handed and never updates
it (`step(scaler, opt)`, read from the helper's summary when it lives in another module) is
a step, judged the same way.

## Example
```python
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
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
The fix inserts `scaler.update()` right after the iteration's last `scaler.step(...)`, at
the same indentation (inside the same accumulation guard; on the same line after a `;` or in
a one-line suite). It is safe: the code could not run a second iteration without it. It is
not offered when the step is a `return` statement (the update would be dead code), when
the step is part of a larger statement, or when the function updates the scaler elsewhere.
"""
    valid = [
        # canonical loop
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        # helper receives the scaler; the caller updates
        """
import torch
def optimizer_step(scaler, optimizer):
    scaler.step(optimizer)

scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    optimizer_step(scaler, optimizer)
    scaler.update()
""",
        # update in another method called from the loop
        """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def fit(self, loader):
        for x in loader:
            self.scaler.scale(self.model(x)).backward()
            self.scaler.step(self.opt)
            self._after_step()
    def _after_step(self):
        self.scaler.update()
""",
        # update in finally
        """
from torch.amp import GradScaler
scaler = GradScaler("cuda")
for x in loader:
    try:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
    finally:
        scaler.update()
""",
        # accumulation guard with continue
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / 4).backward()
    if (i + 1) % 4 != 0:
        continue
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
""",
        # several optimizers stepped in a loop, one update after
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for opt in optimizers:
        scaler.step(opt)
    scaler.update()
""",
        # a helper with step + update that receives the scaler under another name
        """
import torch
def step_all(s, optimizer, update_grad=True):
    if update_grad:
        s.step(optimizer)
        s.update()
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    step_all(scaler, opt)
""",
        # not a torch scaler (fairseq-style own scaler)
        """
from fairseq.optim import DynamicLossScaler
scaler = DynamicLossScaler(init_scale=128)
for x in loader:
    scaler.step(opt)
""",
        # a step helper that loops over the optimizers by name; its caller updates
    """
import torch
class Optimizers:
    def step_some(self, grad_scaler: torch.amp.GradScaler, groups):
        for group in groups:
            optimizer = self.optimizers[group]
            grad_scaler.step(optimizer)
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # update only after the loop: the second batch raises
        Invalid(
            """
from torch.cuda.amp import GradScaler
scaler = GradScaler()
for epoch in range(3):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
    scaler.update()
""",
            fixed=None,  # the update must move, not be added: left to the user
        ),
        # a scaler attribute never updated anywhere in the class
        Invalid(
            """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, x):
        self.scaler.scale(self.model(x)).backward()
        self.scaler.step(self.optimizer)
""",
            fixed="""
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def train_step(self, x):
        self.scaler.scale(self.model(x)).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        ),
        # a parameter-scaler stepped in the function's own loop
        Invalid(
            """
import torch
def train(model, loader, opt, scaler: torch.amp.GradScaler):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
""",
            fixed="""
import torch
def train(model, loader, opt, scaler: torch.amp.GradScaler):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        scaler.update()
""",
        ),
        # fairscale's ShardedGradScaler subclasses torch's GradScaler: the same protocol
        Invalid(
            """
from fairscale.optim.grad_scaler import ShardedGradScaler
scaler = ShardedGradScaler()
for epoch in range(3):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
    scaler.update()
""",
            fixed=None,
        ),
        # the only update runs on the pass that leaves the loop
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    if i == last:
        scaler.update()
        break
""",
        ),
    ]

    def check(self, model):
        flagged: dict[tuple, object] = {}
        for e in [*model.events("step"), *helper_steps(model)]:
            key = e.scaler
            if key[0] == "A" and not model.constructions(key):
                continue  # a scaler handed to the object (`self.scaler = scaler`): its owner updates it, or not
            loop = model.iteration_loop(e)
            if loop is None and e.extra.get("helper"):
                continue  # (a helper handed the scaler outside a loop: the scaler escapes to it)
            if loop is not None:
                cycle = cycle_through(cfg.of(e.func), e.stmt, loop.node)
                if cycle is None:
                    continue  # every pass leaves the loop after this step: it does not repeat
                if model.may_update(e.func, key, within=loop, on=cycle):
                    continue  # an update (or a call that may update) between this pass's step and the next's
                if updated_after_inner_loop(model, e, loop):
                    continue
                if key[0] == "A":
                    cls = model.classes.get(key[1])
                    if cls is None or cls.has_unknown_bases:
                        continue
                group = (key, id(loop))
            else:
                if model.may_update(e.func, key):
                    continue
                if key[0] == "L":
                    if model.func_of_key(key) is not e.func and model.func_of_key(key) is not None:
                        continue  # closure over an enclosing function's scaler
                    if any(p == key[2] for p in e.func.params):
                        continue  # a parameter: the caller may update
                    if model.escapes(key, e.func):
                        continue
                elif key[0] == "A":
                    cls = model.classes.get(key[1])
                    if cls is None or cls.has_unknown_bases:
                        continue
                    if model.updated_anywhere(key) or model.escapes(key, e.func):
                        continue
                    if any(model.may_update(f, key) for f in cls.methods.values() if f.walked):
                        continue
                elif key[0] == "G":
                    if model.updated_anywhere(key) or model.escapes(key, e.func):
                        continue
                else:
                    continue
                group = (key, id(e.func))
            if e.extra.get("helper") and group in flagged:
                continue  # (the scaler's own step in this loop is reported)
            flagged[group] = e  # events are in order: the last step wins
        yield from self._report(model, flagged)

    def _report(self, model, flagged):
        for e in flagged.values():
            loop = model.iteration_loop(e)
            why = ((e.node.lineno, "the scaler's step" + (f" (in `{e.extra['helper']}()`)" if e.extra.get("helper") else "")),
                   (loop.node.lineno, "the loop repeats it: no `update()`, nor a call that may run one, on the cycle "
                                      "back to the next pass's step (the core's cycle through the step)")
                   if loop is not None else
                   (e.node.lineno, "no `update()` later in the function, and the scaler does not leave it"))
            helper = e.extra.get("helper")
            s = None if helper else receiver_text(model, e.node)  # (a helper call has no scaler receiver)
            fix = None
            elsewhere = any(u.kind == "update" and u.scaler == e.scaler for u in e.func.events)
            # never after a `return` (`return self.scaler.step(opt)`: dead code); none for a helper's step
            if not helper and simple_stmt(e) and not isinstance(e.stmt, ast.Return) and not elsewhere:
                fix = Fix(
                    "safe",
                    f"Insert `{s}.update()` after `{s}.step(...)`",
                    (InsertStatement(stmt_anchor(model, e.stmt), f"{s}.update()"),),
                )
            what = (f"`{helper}()` steps the GradScaler but nothing in this loop calls `update()`" if helper
                    else f"`{s}.step()` without a later `{s}.update()` in the iteration")
            yield self.diagnostic(
                model,
                e.node,
                f"{what}; the next step raises \"step() has already been called since the last update()\"",
                fix,
                e.stmt,
                why=why,
            )
