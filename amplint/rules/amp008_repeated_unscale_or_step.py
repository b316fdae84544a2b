from __future__ import annotations

import ast

from amplint.core import cfg
from amplint.core.loops import boundary_test, encloses, runs_every_iteration
from amplint.core.typestate import MORE, ScalerStates, may_update_within
from amplint.rules import Invalid, Rule
from amplint.rules._util import same_iteration, scaler_text


class RepeatedUnscaleOrStep(Rule):
    code = "AMP008"
    severity = "error"
    name = "repeated-unscale-or-step"
    summary = "`scaler.unscale_(opt)` or `scaler.step(opt)` twice for one optimizer before `update()`"
    docs = """
## What it does
Checks for a second `GradScaler.unscale_(optimizer)` or `GradScaler.step(optimizer)` for
the same optimizer, or an `unscale_` after its `step`, with no `update()` in between.

## Why is this bad?
The scaler keeps per-optimizer state until `update()`. torch raises:

* `unscale_` twice: `RuntimeError: unscale_() has already been called on this optimizer since the last update().`
* `step` twice: `RuntimeError: step() has already been called since the last update().`
* `unscale_` after `step`: `RuntimeError: unscale_() is being called after step().`

`unscale_` followed by `step` is the documented order and is not reported, nor are calls
in exclusive branches or on different optimizers of a loop over the optimizers.

With gradient accumulation the repeat comes from the next iteration: an `unscale_` (or
`step`) that runs on every micro-batch while `update()` runs only under the accumulation test
(`if (i + 1) % accum_steps == 0:`) raises on the second micro-batch (measured with torch
2.13: `unscale_` each micro-batch, `step`/`update` every 4 raises at micro-batch 2). This is
reported when every `update()` of the loop is under a test with `%` or a name holding
`accum` that does not enclose the `unscale_`/`step`, and nothing else in the loop (a call
that receives the scaler, an unknown method of the same object) may update it.

## Fix safety
No fix is offered: moving the call under the accumulation test changes what the clip sees
on the other micro-batches, which only the author can decide.

## Example
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
clip_grad_norm_(model.parameters(), 1.0)
scaler.unscale_(optimizer)
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```
"""
    valid = [
        # a helper handed the scaler updates it between the two phases
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def finish(s):
    s.update()
def train(loader, model, opt):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        finish(scaler)
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        scaler.update()
""",
        # two tests of one flag: the unscale_ runs once whichever way it goes
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def train(loader, model, opt, clip):
    for x in loader:
        scaler.scale(model(x)).backward()
        if clip:
            scaler.unscale_(opt)
        log(x)
        if not clip:
            scaler.unscale_(opt)
        scaler.step(opt)
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
        # one call per optimizer in a loop over the optimizers, twice
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for opt in optimizers:
        scaler.unscale_(opt)
    clip_all()
    for opt in optimizers:
        scaler.step(opt)
    scaler.update()
""",
        # exclusive branches
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    if clip:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(optimizer)
    else:
        scaler.step(optimizer)
    scaler.update()
""",
        # a GAN: update between the two phases
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(d_loss(x)).backward()
    scaler.step(opt)
    scaler.update()
    scaler.scale(g_loss(x)).backward()
    scaler.step(opt)
    scaler.update()
""",
        # accumulation: unscale_, step and update all under the accumulation test
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / accum).backward()
    if (i + 1) % accum == 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        # accumulation: the unscale_ is under its own accumulation test (unknown: silent)
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / accum).backward()
    if (i + 1) % log_every == 0:
        scaler.unscale_(optimizer)
        log(grad_norm(model))
    if (i + 1) % accum == 0:
        scaler.step(optimizer)
        scaler.update()
""",
        # accumulation: a helper that receives the scaler may update it
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / accum).backward()
    scaler.unscale_(optimizer)
    finish_micro_batch(scaler, optimizer)
    if (i + 1) % accum == 0:
        scaler.step(optimizer)
        scaler.update()
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        Invalid(
            """
import torch
class T:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        if self.log_grads:
            self.scaler.unscale_(self.opt)
        self.scaler.step(self.opt)
        self.scaler.update()
""",
            count=2,
        ),
        # the Swin-Transformer SimMIM shape: unscale_ every micro-batch, step/update every N
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for idx, x in enumerate(loader):
    scaler.scale(model(x) / accum_steps).backward()
    if clip_grad:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
    if (idx + 1) % accum_steps == 0:
        scaler.step(optimizer)
        optimizer.zero_grad()
        scaler.update()
""",
        ),
        # step on every micro-batch, update every N
        Invalid(
            """
import torch
def fit(model, loader, opt, grad_accum):
    scaler = torch.amp.GradScaler("cuda")
    for i, x in enumerate(loader, 1):
        scaler.scale(model(x)).backward()
        scaler.step(opt)
        if i % grad_accum == 0:
            opt.zero_grad()
            scaler.update()
""",
        ),
    ]

    def check(self, model):
        yield from self._pairs(model)
        yield from self._carried(model)

    def _pairs(self, model):
        """A second ``unscale_``/``step`` of one optimizer while the first is, on every path
        consistent with the scaler's own branch tests, still in the core's set of events since
        the last update (no update, and no call that may update, in between)."""
        for f in model.funcs:
            calls = [e for e in f.events if e.kind in ("unscale", "step") and e.optimizer and e.scaler is not None]
            if len(calls) < 2:
                continue
            graph, states = None, {}
            for e2 in calls[1:]:
                if e2.scaler not in states:
                    graph = graph or cfg.of(f)
                    states[e2.scaler] = ScalerStates(model, f, e2.scaler, graph)
                e1 = self._repeated(model, e2, states[e2.scaler].on_entry(e2.stmt))
                if e1 is None:
                    continue
                st = scaler_text(model, f, e2.scaler)
                what = "unscale_" if e2.kind == "unscale" else "step"
                first = "unscale_" if e1.kind == "unscale" else "step"
                yield self.diagnostic(
                    model,
                    e2.node,
                    f"`{st}.{what}({e2.optimizer})` after `{st}.{first}({e1.optimizer})` (line {e1.node.lineno}) "
                    f"with no `update()` in between raises \"{_ERRORS[(e1.kind, e2.kind)]}\"",
                    None,
                    e2.stmt,
                )

    @staticmethod
    def _repeated(model, e2, at):
        """The earliest event of ``e2``'s optimizer that ``e2`` repeats in some assumption set."""
        hits = [
            e1 for state in at.values() for e1 in state
            if e1 is not MORE and e1.seq < e2.seq and e1.optimizer == e2.optimizer and (e1.kind, e2.kind) in _ERRORS
            and e1.loops == e2.loops and same_iteration(model, e1, e2)
            and not any(e1.optimizer in lp.targets or e1.optimizer.split(".")[0] in lp.targets for lp in e1.loops)
        ]
        return min(hits, key=lambda e: e.seq) if hits else None

    def _carried(self, model):
        """An unscale_/step on every micro-batch, update() only under the accumulation test:
        the repeat comes from the next iteration of the loop."""
        for f in model.funcs:
            tests = None
            for e in f.events:
                if e.kind not in ("unscale", "step") or not e.optimizer or e.scaler is None:
                    continue
                loop = model.iteration_loop(e)
                if tests is None:
                    ifs = {id(n): n for n in ast.walk(f.node) if isinstance(n, ast.If)}
                    tests = {k: n.test for k, n in ifs.items()}
                if loop is None or not runs_every_iteration(e, tests, loop):
                    continue
                updates = [u for u in f.events if u.kind == "update" and u.scaler == e.scaler and loop in u.loops]
                if not updates or any(u.extra.get("value") for u in updates):
                    continue
                mine = {lit.group for lit in e.ctx.lits}
                guards = []
                for u in updates:
                    if not u.co_occurs(e):
                        continue
                    # the update inside the accumulation `if` (an `if ...: continue` before it is AMP012's)
                    extra = [t for lit in u.ctx.lits if lit.group not in mine and (t := tests.get(lit.group)) is not None
                             and boundary_test(t) and encloses(ifs[lit.group], u.node)]
                    if not extra:
                        guards = None  # an update that runs whenever this call does
                        break
                    guards.append((u, extra[0]))
                if not guards or may_update_within(model, f, loop.node, e.scaler):
                    continue
                st = scaler_text(model, f, e.scaler)
                what = "unscale_" if e.kind == "unscale" else "step"
                err = _ERRORS[(e.kind, e.kind)]
                u, test = guards[0]
                yield self.diagnostic(
                    model,
                    e.node,
                    f"`{st}.{what}({e.optimizer})` runs on every micro-batch but `{st}.update()` (line {u.node.lineno}) only "
                    f"when `{_short(ast.unparse(test))}`: the next micro-batch raises \"{err}\"",
                    None,
                    e.stmt,
                )


_ERRORS = {
    ("unscale", "unscale"): "unscale_() has already been called on this optimizer since the last update().",
    ("step", "step"): "step() has already been called since the last update().",
    ("step", "unscale"): "unscale_() is being called after step().",
}


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."
