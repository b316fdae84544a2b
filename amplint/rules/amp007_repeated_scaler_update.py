from __future__ import annotations

import ast

from amplint.diagnostics import Fix, InsertStatement, ReplaceStatement
from amplint.model.queries_extra import abandons
from amplint.rules import Invalid, Rule
from amplint.rules._util import is_simple_call_stmt, scaler_text, stmt_anchor

SCALER_KINDS = ("step", "unscale", "update")


def accumulation_guard(lit) -> bool:
    k = (lit.key or "").lower()
    return "%" in k or "accum" in k or "sync_grad" in k


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
optimizers, or on every micro-batch while `scaler.step()` runs only under a gradient
accumulation guard.

## Why is this bad?
`update()` must run once per iteration, after every optimizer stepped.

* `step(o1); update(); step(o2); update()` is silent but wrong: `o2`'s gradients, produced
  with scale S, are unscaled with the updated scale (measured: `o2`'s update 0.5x or 2x the
  correct one), and the scale grows twice as fast (`[1,1,1,2,...]` vs `[1,2,2,4,...]`).
* `update()` on a micro-batch where no `step()` ran raises
  `AssertionError: No inf checks were recorded prior to update.`

A second backward pass after the first update (`step(opt_d); update();
scaler.scale(loss_g).backward(); step(opt_g); update()`) is a new scaler iteration and is
not reported, nor is a loop over (optimizer, loss) pairs whose every pass runs its own
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
    ]

    def check(self, model):
        for f in model.funcs:
            # update(new_scale) only sets the scale (no inf checks needed): not a repeat
            ups = [e for e in f.events if e.kind == "update" and not _explicit(e)]
            if not ups:
                continue
            for u in ups:
                d = self._between_steps(model, f, u) or self._per_optimizer(model, f, u) or self._per_micro_batch(model, f, u)
                if d is not None:
                    yield d

    def _msg(self, model, f, u, why):
        st = scaler_text(model, f, u.scaler)
        return f"`{st}.update()` {why}; call it once per iteration, after the last `{st}.step()`"

    def _between_steps(self, model, f, u):
        nxt = None
        for e in f.events:
            if e.seq <= u.seq or e.scaler != u.scaler or not e.co_occurs(u):
                continue
            if e.kind == "backward" and e.scaled:
                return None  # a new scaled backward: a new scaler iteration
            if e.kind in SCALER_KINDS and not _explicit(e):
                loop = model.iteration_loop(e)
                if (loop is None and not u.loops) or (loop is not None and loop in u.loops):
                    nxt = e
                    break
        if nxt is None:
            return None
        jump = abandons(model, f, u.stmt)
        if jump is not None and nxt.node.lineno > (jump.end_lineno or jump.lineno):
            return None  # `scaler.update(); break`: the later step is not reached on this path
        fix = None
        later = [
            x for x in f.events
            if x.kind == "update" and not _explicit(x) and x.scaler == u.scaler and x.seq > nxt.seq and x.co_occurs(u) and x.loops == u.loops
        ]
        if later and is_simple_call_stmt(u) and nxt.kind != "update":
            fix = Fix("safe", "Remove this `update()`; the last one stays", (ReplaceStatement(stmt_anchor(model, u.stmt), ""),))
        elif nxt.kind == "update" and is_simple_call_stmt(u) and u.loops == nxt.loops:
            fix = Fix("safe", "Remove the repeated `update()`", (ReplaceStatement(stmt_anchor(model, u.stmt), ""),))
        why = "runs before another `step()`/`unscale_()` of the same iteration" if nxt.kind != "update" else "is called twice in one iteration (raises `No inf checks were recorded prior to update.`)"
        return self.diagnostic(model, u.node, self._msg(model, f, u, why), fix, u.stmt)

    def _per_optimizer(self, model, f, u):
        for loop in u.loops:
            steps = [
                s for s in f.events
                if s.kind == "step" and s.scaler == u.scaler and loop in s.loops and s.seq < u.seq
                and s.optimizer and any(t in loop.targets for t in _names(s.node.args[:1]))
            ]
            if not steps:
                continue
            if _one_optimizer(model, f, loop) or _picks_one(loop):
                continue  # the loop steps one optimizer: one in the collection, or one picked per pass
            if any(
                b.kind == "backward" and b.scaled and b.scaler == u.scaler and loop in b.loops and b.seq < steps[0].seq
                for b in f.events
            ):
                # each pass runs its own scaled backward: a full scaler iteration per
                # (optimizer, loss) pair, not one iteration with several updates
                continue
            fix = None
            outer_after = [
                x for x in f.events if x.kind == "update" and not _explicit(x) and x.scaler == u.scaler and x.seq > u.seq and loop not in x.loops
            ]
            if is_simple_call_stmt(u) and not outer_after and u.loops[-1] is loop and isinstance(loop.node, ast.For):
                st = scaler_text(model, f, u.scaler)
                fix = Fix(
                    "safe",
                    "Move `update()` after the loop over the optimizers",
                    (
                        ReplaceStatement(stmt_anchor(model, u.stmt), ""),
                        InsertStatement(stmt_anchor(model, loop.node), f"{st}.update()"),
                    ),
                )
            return self.diagnostic(
                model, u.node, self._msg(model, f, u, "runs once per optimizer in the loop over the optimizers"), fix, u.stmt
            )
        return None

    def _per_micro_batch(self, model, f, u):
        for s in f.events:
            if s.kind != "step" or s.scaler != u.scaler or s.seq > u.seq or not s.co_occurs(u):
                continue
            loop = model.iteration_loop(s)
            if loop is None or loop not in u.loops:
                continue
            guards = [lit for lit in s.ctx.lits - u.ctx.lits if accumulation_guard(lit)]
            if not guards:
                continue
            # an unguarded step in the same iteration would make this update legitimate
            if any(
                x.kind == "step" and x.scaler == u.scaler and x.co_occurs(u) and not (set(guards) & x.ctx.lits)
                and loop in x.loops
                for x in f.events
            ):
                return None
            last = [x for x in f.events if x.kind == "step" and x.scaler == u.scaler and set(guards) <= x.ctx.lits and x.loops == s.loops][-1]
            fix = None
            if is_simple_call_stmt(u) and is_simple_call_stmt(last):
                st = scaler_text(model, f, u.scaler)
                fix = Fix(
                    "safe",
                    "Move `update()` under the accumulation guard, after the step",
                    (
                        ReplaceStatement(stmt_anchor(model, u.stmt), ""),
                        InsertStatement(stmt_anchor(model, last.stmt), f"{st}.update()"),
                    ),
                )
            return self.diagnostic(
                model,
                u.node,
                self._msg(model, f, u, "runs on every micro-batch but `step()` only under the accumulation guard "
                          "(raises `No inf checks were recorded prior to update.`)"),
                fix,
                u.stmt,
            )
        return None


def _explicit(e) -> bool:
    """``scaler.update(new_scale)``: sets the scale, reads no inf checks."""
    return e.kind == "update" and isinstance(e.node, ast.Call) and bool(e.node.args or e.node.keywords)


def _names(nodes):
    for n in nodes:
        for x in ast.walk(n):
            if isinstance(x, ast.Name):
                yield x.id


def _one_optimizer(model, f, loop) -> bool:
    """Does the loop go over ``self.<attr>`` (``.keys()``/``.values()``/``.items()``, directly or
    through one local: ``names = self.optimizers.keys()``), a dict that the file fills with
    one literal key only (``self.optimizers["model"] = ...``)? Then it runs once."""
    it = getattr(loop.node, "iter", None)
    if isinstance(it, ast.Name):
        vals = [a.value for a in model.assigns.get(model.key_of_expr(it, f), ()) if a.func is f]
        it = vals[0] if len(vals) == 1 else None
    if isinstance(it, ast.ListComp) and len(it.generators) == 1:
        it = it.generators[0].iter
        if isinstance(it, ast.Name):
            vals = [a.value for a in model.assigns.get(model.key_of_expr(it, f), ()) if a.func is f]
            it = vals[0] if len(vals) == 1 else None
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("keys", "values", "items") and not it.args:
        it = it.func.value
    if not (isinstance(it, ast.Attribute) and isinstance(it.value, ast.Name) and it.value.id == f.self_name):
        return False
    attr, keys = it.attr, set()
    for n in ast.walk(model.tree):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)) and _is_attr(n.value, attr):
            if not (isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)):
                return False
            keys.add(n.slice.value)
        elif isinstance(n, ast.Assign) and any(_is_attr(t, attr) for t in n.targets):
            v = n.value
            if isinstance(v, ast.Dict) and v.keys:
                return False
            if not isinstance(v, (ast.Dict, ast.DictComp)):
                return False  # a list, a call: its length is unknown
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("update", "setdefault", "append", "extend") and _is_attr(n.func.value, attr):
            return False
    return len(keys) == 1


def _is_attr(node, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) and node.value.id == "self"


def _picks_one(loop) -> bool:
    """``for i, opt in enumerate(optimizers): if i != optim_idx: continue`` (the ``and``ed
    ``optim_idx is not None`` included): the body runs for the one optimizer of this turn."""
    body = getattr(loop.node, "body", [])
    first = body[0] if body else None
    if not (isinstance(first, ast.If) and len(first.body) == 1 and isinstance(first.body[0], ast.Continue) and not first.orelse):
        return False
    tests = first.test.values if isinstance(first.test, ast.BoolOp) and isinstance(first.test.op, ast.And) else [first.test]
    return any(
        isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq)
        and any(isinstance(x, ast.Name) and x.id in loop.targets for x in (t.left, *t.comparators))
        for t in tests
    )

