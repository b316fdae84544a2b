from __future__ import annotations

import ast
import os

from amplint.core.typestate import CallUpdate, ScalerStates, UpdateReach, accumulation_guard, explicit_update, skipped_step
from amplint.diagnostics import Fix, InsertStatement, ReplaceStatement
from amplint.model.queries_extra import names_in, one_pass_per_call
from amplint.rules import Invalid, Rule
from amplint.rules._util import is_simple_call_stmt, scaler_text, stmt_anchor


class RepeatedScalerUpdate(Rule):
    code = "AMP007"
    severity = "error"
    name = "repeated-scaler-update"
    summary = "More than one `scaler.update()` per iteration (per optimizer, or per micro-batch)"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for a `GradScaler.update()` that runs more than once per training iteration:
between the steps of two optimizers that share one backward, inside a loop over the
optimizers, in a step helper of the file called once per optimizer, or on every micro-batch
while `scaler.step()` runs only under a gradient accumulation guard. An update is reported
when another `step()`, `unscale_()` or `update()` of its scaler follows it, later in the pass
or on the next pass of a loop, with no backward in between; a call that may run a backward
(one amplint cannot follow) counts as one.

## Why is this bad?
`update()` must run once per iteration, after every optimizer stepped.

* `step(o1); update(); step(o2); update()` is silent but wrong: `o2`'s gradients, produced
  with scale S, are unscaled with the updated scale (measured: `o2`'s update 0.5x or 2x the
  correct one), and the scale grows twice as fast (`[1,1,1,2,...]` vs `[1,2,2,4,...]`).
* `update()` on a micro-batch where no `step()` ran raises
  `AssertionError: No inf checks were recorded prior to update.`

A second backward pass after the first update (`step(opt_d); update();
scaler.scale(loss_g).backward(); step(opt_g); update()`) is a new scaler iteration and is
not reported (an unscaled one is AMP005's), nor is a loop over (optimizer, loss) pairs whose every pass runs its own
scaled backward, step and update (a full scaler iteration per pair), nor two scalers each
updated once, nor `scaler.update(new_scale)` (it only sets the scale; measured: no error
after the real update).

## Example
```python
scaler.scale(loss).backward()
scaler.step(opt_enc)
scaler.update()
scaler.step(opt_dec)
scaler.update()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.step(opt_enc)
scaler.step(opt_dec)
scaler.update()
```

## Fix safety
The fix removes every update but the last one of the iteration, or moves the update under
the accumulation guard of the step (or after the loop over the optimizers). It is safe: it
produces the order torch documents.
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt_a)
    scaler.step(opt_b)
    scaler.update()
""",
        # GAN: a fresh scaled backward after the first update
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(d_loss(x)).backward()
    scaler.step(opt_d)
    scaler.update()
    scaler.scale(g_loss(x)).backward()
    scaler.step(opt_g)
    scaler.update()
""",
        # accumulation: step and update under the same guard
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / 4).backward()
    if (i + 1) % 4 == 0:
        scaler.step(opt)
        scaler.update()
""",
        # a floor on the scale after the real update: update(new_scale) needs no inf checks
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    scaler.update()
    if scaler.get_scale() < MIN_SCALE:
        scaler.update(MIN_SCALE)
""",
        # a loop over (optimizer, loss) pairs, each pass a full scaler iteration
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    losses = model(x)
    for opt, loss in zip(optimizers, losses):
        opt.zero_grad()
        scaler.scale(loss).backward(retain_graph=True)
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(opt)
        scaler.update()
""",
        # two scalers, each updated once
        """
import torch
scaler_a = torch.amp.GradScaler("cuda")
scaler_b = torch.amp.GradScaler("cuda")
for x in loader:
    scaler_a.scale(la(x)).backward()
    scaler_b.scale(lb(x)).backward()
    scaler_a.step(opt_a)
    scaler_a.update()
    scaler_b.step(opt_b)
    scaler_b.update()
""",
        # exclusive branches
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    if mode == "a":
        scaler.step(opt_a)
        scaler.update()
    else:
        scaler.step(opt_b)
        scaler.update()
""",
        # AMP switch around the step, update always (a disabled scaler's update is a no-op)
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
        # a skip branch closes the scaler iteration and starts the loop again
    """
import torch
class Trainer:
    def __init__(self):
        self.scaler_D = torch.amp.GradScaler("cuda")
    def dis_update(self, data):
        update_finished = False
        while not update_finished:
            with torch.autocast("cuda"):
                total_loss = self.dis_forward(data)
            self.opt_D.zero_grad(set_to_none=True)
            self.scaler_D.scale(total_loss).backward()
            if hasattr(self.cfg, "clip_grad_norm"):
                self.scaler_D.unscale_(self.opt_D)
                total_norm = torch.nn.utils.clip_grad_norm_(self.net_D.parameters(), self.cfg.clip_grad_norm)
                if torch.isfinite(total_norm) and total_norm > self.cfg.clip_grad_norm:
                    if getattr(self.cfg, "skip_grad", False):
                        self.opt_D.zero_grad(set_to_none=True)
                        self.scaler_D.step(self.opt_D)
                        self.scaler_D.update()
                        continue
            self.scaler_D.step(self.opt_D)
            self.scaler_D.update()
            update_finished = True
""",
        # one optimizer picked per pass (a GAN turn), each a full scaler iteration
    """
import torch
def train_one_epoch(model, loader, optimizers, scaler: torch.amp.GradScaler):
    for batch in loader:
        for turn in ("generator", "discriminator"):
            out = model(batch, turn)
            loss, optim_idx = out["loss"], out["optim_idx"]
            scaler.scale(loss).backward()
            for iopt, optimizer in enumerate(optimizers):
                if optim_idx is not None and iopt != optim_idx:
                    continue
                scaler.step(optimizer)
                scaler.update()
""",
        # the backward runs in a method of the object: each pass is a new iteration
        """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def backward(self, loss):
        self.scaler.scale(loss).backward()
    def fit(self):
        for x in self.loader:
            self.backward(self.model(x))
            self.scaler.step(self.opt)
            self.scaler.update()
""",
        # a backward that runs out of memory is skipped with `continue`
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    try:
        scaler.scale(model(x)).backward()
    except RuntimeError:
        continue
    scaler.step(opt)
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
    scaler.step(opt_enc)
    scaler.update()
    scaler.step(opt_dec)
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt_enc)
    scaler.step(opt_dec)
    scaler.update()
""",
        ),
        # one update per optimizer, in a loop over the optimizers
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for opt in optimizers:
        scaler.step(opt)
        scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for opt in optimizers:
        scaler.step(opt)
    scaler.update()
""",
        ),
        # update on every micro-batch, step under the accumulation guard
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / 4).backward()
    if (i + 1) % 4 == 0:
        scaler.step(opt)
        opt.zero_grad()
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for i, x in enumerate(loader):
    scaler.scale(model(x) / 4).backward()
    if (i + 1) % 4 == 0:
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
""",
        ),
        # a step helper that also updates, called once per optimizer
        Invalid(
            """
import torch
class Trainer:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def _step(self, opt):
        self.scaler.step(opt)
        self.scaler.update()
    def fit(self):
        for x in self.loader:
            self.scaler.scale(self.model(x)).backward()
            self._step(self.opt_a)
            self._step(self.opt_b)
""",
        ),
        # a while loop over the optimizers
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    i = 0
    while i < len(optimizers):
        scaler.step(optimizers[i])
        scaler.update()
        i += 1
""",
        ),
    ]

    def check(self, model):
        """An update that another ``step()``/``unscale_()``/``update()`` of its scaler reaches
        with no backward in between (the core's reaching updates: later in the same pass, or on
        the next pass of a loop), and an update that runs on every micro-batch while the step
        runs under an accumulation guard (the core's typestate, as AMP011 asks it)."""
        for f in model.funcs:
            ups = [e for e in f.events if e.kind == "update" and not explicit_update(e)]
            keys = {e.scaler for e in ups} | {k for c in f.calls for _p, k in c.arg_keys if model.is_scaler(k)}  # (helpers)
            if any(model.resolve_callee(c) is not None for c in f.calls):  # a method may update the object's scaler
                keys |= {e.scaler for e in f.events if e.scaler is not None and e.scaler[0] in ("A", "G")}
            done = set()
            for key in sorted(keys, key=str):
                for u, e, loops in UpdateReach(model, f, {key}).premature():
                    d = self._premature(model, f, key, u, e, loops)
                    if d is not None:
                        done.add(id(u))
                        yield d
            states = {}
            for u in ups:
                if id(u) in done:
                    continue
                if u.scaler not in states:
                    states[u.scaler] = ScalerStates(model, f, u.scaler, unseen="step")
                d = self._per_micro_batch(model, f, u, states[u.scaler])
                if d is not None:
                    yield d

    def _msg(self, model, f, u, why):
        st = scaler_text(model, f, u.scaler)
        return f"`{st}.update()` {why}; call it once per iteration, after the last `{st}.step()`"

    def _premature(self, model, f, key, u, e, loops):
        st = scaler_text(model, f, key)
        what = getattr(e, "kind", None) or "update"
        why_path = (
            (u.node.lineno, "`update()` closes the iteration"),
            (e.node.lineno, f"the `{'unscale_' if what == 'unscale' else what}()` it reaches (the core's update reach)"
             + (f", round the loop at line {loops[0].lineno}" if loops else "") + ", no backward between"),
        )
        if isinstance(u, CallUpdate):
            name = model.text(u.call.node.func)
            inner = (f"`{scaler_text(model, f, u.inner.scaler)}.update()`, line {u.inner.node.lineno}" if u.inner is not None
                     else f"its `update()`, in `{os.path.basename(u.where)}`")
            msg = (f"`{name}()` updates the scaler ({inner}) before another "
                   f"`step()` of the same iteration (line {e.node.lineno}, with no backward in between); call "
                   f"`update()` once per iteration, after the last `{st}.step()`")
            return None if loops else self.diagnostic(model, u.call.node, msg, None, u.stmt, why=why_path)
        if not loops:
            if hasattr(e, "ctx") and not e.co_occurs(u):
                return None
            fix = None
            later = [x for x in f.events if x.kind == "update" and not explicit_update(x) and x.scaler == u.scaler
                     and x.seq > e.seq and x.co_occurs(u) and x.loops == u.loops]
            if later and is_simple_call_stmt(u) and getattr(e, "kind", None) != "update":
                fix = Fix("safe", "Remove this `update()`; the last one stays", (ReplaceStatement(stmt_anchor(model, u.stmt), ""),))
            elif getattr(e, "kind", None) == "update" and is_simple_call_stmt(u) and u.loops == e.loops:
                fix = Fix("safe", "Remove the repeated `update()`", (ReplaceStatement(stmt_anchor(model, u.stmt), ""),))
            why = ("is called twice in one iteration (raises `No inf checks were recorded prior to update.`)"
                   if getattr(e, "kind", None) == "update" else "runs before another `step()`/`unscale_()` of the same iteration")
            return self.diagnostic(model, u.node, self._msg(model, f, u, why), fix, u.stmt, why=why_path)
        loop = next((lp for lp in u.loops if lp.node is loops[0]), None)
        if loop is None or one_pass_per_call(model, f, loop):
            return None  # the loop runs once per call, or steps one optimizer per pass
        per_opt = getattr(e, "kind", None) == "step" and any(t in loop.targets for t in names_in(e.node.args[:1]))
        fix = None
        outer_after = [x for x in f.events if x.kind == "update" and not explicit_update(x) and x.scaler == u.scaler and x.seq > u.seq and loop not in x.loops]
        if per_opt and is_simple_call_stmt(u) and not outer_after and u.loops[-1] is loop and isinstance(loop.node, ast.For):
            fix = Fix("safe", "Move `update()` after the loop over the optimizers",
                      (ReplaceStatement(stmt_anchor(model, u.stmt), ""), InsertStatement(stmt_anchor(model, loop.node), f"{st}.update()")))
        why = ("runs once per optimizer in the loop over the optimizers" if per_opt else
               f"runs on every pass of the loop at line {loop.node.lineno}, and the next pass steps again with no backward in between")
        return self.diagnostic(model, u.node, self._msg(model, f, u, why), fix, u.stmt, why=why_path)

    def _per_micro_batch(self, model, f, u, states):
        hit = skipped_step(states, u)
        if hit is None or not any(accumulation_guard(lit) for lit in hit[1]):
            return None
        s, guards = hit
        last = [x for x in f.events if x.kind == "step" and x.scaler == u.scaler and set(guards) <= x.ctx.lits and x.loops == s.loops][-1]
        fix = None
        if is_simple_call_stmt(u) and is_simple_call_stmt(last):
            st = scaler_text(model, f, u.scaler)
            fix = Fix("safe", "Move `update()` under the accumulation guard, after the step",
                      (ReplaceStatement(stmt_anchor(model, u.stmt), ""), InsertStatement(stmt_anchor(model, last.stmt), f"{st}.update()")))
        why = ("runs on every micro-batch but `step()` only under the accumulation guard "
               "(raises `No inf checks were recorded prior to update.`)")
        return self.diagnostic(model, u.node, self._msg(model, f, u, why), fix, u.stmt)
