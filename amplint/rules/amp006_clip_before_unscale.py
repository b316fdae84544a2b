from __future__ import annotations

import ast

from amplint.core import cfg
from amplint.core.grads import GradStates, divided_later, grad_reads, norm_unscaled_by_hand
from amplint.diagnostics import Fix, InsertStatement
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled, scaler_text, simple_stmt, stmt_anchor


class ClipBeforeUnscale(Rule):
    code = "AMP006"
    severity = "error"
    name = "clip-before-unscale"
    summary = "Gradient clipping (or a gradient norm) between a scaled backward and `scaler.step()` without `scaler.unscale_()`"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for `clip_grad_norm_`, `clip_grad_value_`, `get_total_norm` or a gradient norm read
(`p.grad.norm()`) between `scaler.scale(loss).backward()` and `scaler.step(optimizer)`
with no `scaler.unscale_(optimizer)` before it. A project helper named for clipping or a
gradient norm that calls one (`utils.clip_gradients(model, max_norm)`, same file or another
module) counts as the clip, unless it unscales itself; no fix is offered there.

## Why is this bad?
Until `unscale_` the gradients are multiplied by the loss scale (65536 at the start). The
clip threshold is then effectively `max_norm / scale`: with `max_norm=1.0`,
`clip_grad_norm_` measures a total norm of 75142 instead of 1.147, clips the scaled
gradients, and after `scaler.step` unscales them the update is 1.5e-06 instead of 0.1
(measured). Training stalls silently; a logged gradient norm is 65536x too large.
`clip_grad_value_` clips at `clip_value / scale` in the same way.

## Example
```python
scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```

## Fix safety
The fix inserts `scaler.unscale_(optimizer)` right before the clip, for the optimizer the
scaler steps in that iteration. It is safe: `scaler.step` does not unscale again. It is
offered only when one optimizer is stepped, the clip runs exactly as often as the step (the
same loops, and no condition on the step that the clip lacks: a clip on every micro-batch
with the step under `if (i + 1) % accum == 0:` would unscale twice per step and raise), the
clip is not a `return` statement, no `unscale_` follows the clip (a second `unscale_`
would raise), and the norm the clip returns is not divided by the scale later (it would then be
unscaled twice). A norm divided by `scaler.get_scale()` by hand is not reported, in the same
statement or, for a norm that is only read (`p.grad.norm()`, `get_total_norm`, a clip with an
infinite threshold), in a later statement of the function (`gn = gn / scaler.get_scale()`). A
real clip is reported whatever is done with the norm it returns.
"""
    valid = [
        # a norm read on the scaled gradients, divided by the scale in a later statement
        """
import torch
def train(model, loader, optimizer, scaler, log):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        gn = torch.norm(torch.stack([p.grad.norm(2) for p in model.parameters()]), 2)
        gn = gn / scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        log(gn)
""",
        # the same through a name bound to the scale, and an in-place division
        """
import torch
def train(model, loader, optimizer, scaler, log):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        total = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        scale = scaler.get_scale()
        total /= scale
        scaler.step(optimizer)
        scaler.update()
        log(total)
""",
        # the clip helper unscales the gradients itself
        """
import torch
def clip_gradients(scaler, optimizer, model, max_norm):
    scaler.unscale_(optimizer)
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
def train(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        clip_gradients(scaler, optimizer, model, 1.0)
        scaler.step(optimizer)
        scaler.update()
""",
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        # clipping after the step (of the next iteration's grads? no: zeroed) / no scaler in the loop
        """
import torch
from torch.nn.utils import clip_grad_norm_
for x in loader:
    model(x).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
        # unscale_ in a helper
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def unscale_all(s, opts):
    for o in opts:
        s.unscale_(o)
for x in loader:
    scaler.scale(model(x)).backward()
    unscale_all(scaler, [optimizer])
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        # exclusive branches
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    if use_amp:
        scaler.scale(model(x)).backward()
        scaler.unscale_(optimizer)
    else:
        model(x).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
    ]
    invalid = [
        # a real clip of the scaled gradients: dividing the norm it returns does not undo the
        # clip (no fix: the later division would then unscale the logged norm twice)
        Invalid(
            """
import torch
def train(model, loader, optimizer, scaler, log):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        gn = gn / scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        log(gn)
""",
        ),
        # a helper that clips, called before unscale_
        Invalid(
            """
import torch
def clip_all(model, max_norm):
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
def train(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        clip_all(model, 1.0)
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
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # clip under a condition and an accumulation guard, attribute scaler
        Invalid(
            """
from torch.nn.utils import clip_grad_value_
from torch.amp import GradScaler
class T:
    def __init__(self):
        self.scaler = GradScaler("cuda")
    def fit(self, loader):
        for i, x in enumerate(loader):
            self.scaler.scale(self.model(x) / 2).backward()
            if (i + 1) % 2 == 0:
                if self.clip:
                    clip_grad_value_(self.model.parameters(), self.clip)
                self.scaler.step(self.opt)
                self.scaler.update()
""",
            fixed="""
from torch.nn.utils import clip_grad_value_
from torch.amp import GradScaler
class T:
    def __init__(self):
        self.scaler = GradScaler("cuda")
    def fit(self, loader):
        for i, x in enumerate(loader):
            self.scaler.scale(self.model(x) / 2).backward()
            if (i + 1) % 2 == 0:
                if self.clip:
                    self.scaler.unscale_(self.opt)
                    clip_grad_value_(self.model.parameters(), self.clip)
                self.scaler.step(self.opt)
                self.scaler.update()
""",
        ),
        # a logged gradient norm, read per parameter: flagged, not fixed (inside a loop)
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for p in model.parameters():
        log(p.grad.norm())
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # unscale_ after the clip
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
        ),
    ]

    def check(self, model):
        for f in model.funcs:
            keys = {e.scaler for e in f.events if e.kind == "backward" and e.scaled} & {e.scaler for e in f.events if e.kind == "step"}
            keys = sorted((k for k in keys if not scaler_disabled(model, k)), key=str)
            reads = list(grad_reads(model, f)) if keys else []
            if not reads:
                continue
            graph, seen = cfg.of(f), set()
            for key in keys:
                states = GradStates(model, f, key, [c for c, _ in reads], graph)
                steps = [e for e in f.events if e.kind == "step" and e.scaler == key]
                for c, label in reads:
                    d = None if id(c.node) in seen else self._check_read(model, f, key, states, steps, c, label)
                    if d is not None:
                        seen.add(id(c.node))
                        yield d

    def _check_read(self, model, f, key, states, steps, c, label):
        """A read of gradients a scaled backward left scaled on some path (no ``unscale_``, nor a
        call that may run it, on any), that reaches a later ``step()`` of the same scaler."""
        if not states.scaled_at(c) or norm_unscaled_by_hand(c, f):
            return None
        s_list = [s for s in steps if s.seq > c.seq and states.reaches(c, s)]
        if not s_list:
            return None
        s = s_list[0]
        st = scaler_text(model, f, key)
        opts = {x.optimizer for x in s_list if x.loops == s.loops}
        later_unscale = any(u.kind == "unscale" and u.scaler == key and c.seq < u.seq < s.seq for u in f.events)
        loop_opt = any(s.optimizer and s.optimizer in loop.targets for loop in s.loops)
        fix = None
        # the unscale_ goes right before the clip, so the clip must run exactly as often as the
        # step: same loops and no guard on the step that the clip lacks (a clip on every
        # micro-batch with the step under `if (i + 1) % accum == 0:` would unscale twice)
        if (
            len(opts) == 1 and s.optimizer and not later_unscale and not loop_opt and not getattr(c, "helper", False)
            and c.loops == s.loops and not (s.ctx.lits - c.ctx.lits) and simple_stmt(c)
            and not isinstance(c.stmt, ast.Return) and not divided_later(c, f)
        ):
            fix = Fix(
                "safe",
                f"Insert `{st}.unscale_({s.optimizer})` before the clip",
                (InsertStatement(stmt_anchor(model, c.stmt), f"{st}.unscale_({s.optimizer})", "before"),),
            )
        return self.diagnostic(
            model,
            c.node,
            f"{label} sees gradients still multiplied by the loss scale; call `{st}.unscale_({s.optimizer or 'optimizer'})` "
            f"before it (otherwise the threshold is effectively divided by the scale, 65536)",
            fix,
            c.stmt,
            why=((c.node.lineno, "reads the gradients of a scaled backward with no `unscale_()` since, on some path "
                                 "(the core's gradient state)"),
                 (s.node.lineno, "`step()` of the scaler reached after it, no fresh backward between")),
        )
