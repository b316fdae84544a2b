from __future__ import annotations

import ast

from amplint.diagnostics import Fix, InsertStatement, ReplaceStatement, RewriteCall
from amplint.model import amp_ish
from amplint.rules import Invalid, Rule
from amplint.rules._util import alone_on_line, branch_guard, scaler_text, simple_stmt, stmt_anchor


class OptimizerStepBypassesScaler(Rule):
    code = "AMP004"
    name = "optimizer-step-bypasses-scaler"
    summary = "`optimizer.step()` after `scaler.scale(loss).backward()`"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for a plain `optimizer.step()` in an iteration whose gradients came from
`scaler.scale(loss).backward()`.

## Why is this bad?
The gradients are still multiplied by the loss scale (65536 at the start). SGD then moves
the weights 65536x too far (measured: update norm 7514 instead of 0.1147), and steps whose
gradients hold inf/NaN are applied instead of skipped, which leaves non-finite weights even
with a scale-invariant optimizer such as Adam. Nothing raises; a later `scaler.update()`
alone fails with `No inf checks were recorded prior to update.`

Branches are understood: `if use_amp: scaler.step(opt) else: opt.step()`, early returns and
`continue`s, and framework backward calls (`accelerator.backward(loss)`, Lightning's
`manual_backward`) are not reported.

## Example
```python
scaler.scale(loss).backward()
optimizer.step()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
```

## Fix safety
The fix rewrites `optimizer.step()` to `scaler.step(optimizer)` and inserts
`scaler.update()` after it when no update follows. It is safe: `scaler.step` unscales and
then calls the same `optimizer.step()`.
"""
    valid = [
        # exclusive branches on the same switch
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
for x in loader:
    if use_amp:
        scaler.scale(model(x)).backward()
    else:
        model(x).backward()
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
        # early return in the AMP branch
        """
import torch
def train_step(model, x, optimizer, scaler=None):
    loss = model(x)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss
    loss.backward()
    optimizer.step()
    return loss
""",
        # accelerate: the prepared optimizer owns the scaler
        """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer = accelerator.prepare(model, optimizer)
for x in loader:
    accelerator.backward(model(x))
    optimizer.step()
""",
        # a scheduler step is not an optimizer step
        """
import torch
scaler = torch.amp.GradScaler("cuda")
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
scheduler.step()
""",
        # apex: amp.scale_loss is not a GradScaler
        """
from apex import amp
with amp.scale_loss(loss, optimizer) as scaled_loss:
    scaled_loss.backward()
optimizer.step()
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
    optimizer.step()
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
        # loss = scaler.scale(loss); loss.backward(); then a plain step under an accumulation guard
        Invalid(
            """
import torch
scaler = torch.cuda.amp.GradScaler()
for i, x in enumerate(loader):
    loss = model(x)
    loss = scaler.scale(loss)
    loss.backward()
    if (i + 1) % accum == 0:
        self_opt = optimizer
        optimizer.step()
        scaler.update()
""",
            fixed="""
import torch
scaler = torch.cuda.amp.GradScaler()
for i, x in enumerate(loader):
    loss = model(x)
    loss = scaler.scale(loss)
    loss.backward()
    if (i + 1) % accum == 0:
        self_opt = optimizer
        scaler.step(optimizer)
        scaler.update()
""",
        ),
    ]

    def check(self, model):
        for f in model.funcs:
            backs = [e for e in f.events if e.kind == "backward" and e.scaled]
            if not backs:
                continue
            for p in f.events:
                if p.kind != "opt_step":
                    continue
                b = self._source_backward(f, backs, p)
                if b is None:
                    continue
                s = scaler_text(model, f, b.scaler)
                unscaled = any(
                    u.kind == "unscale" and u.optimizer == p.optimizer and b.seq < u.seq < p.seq and u.co_occurs(p)
                    for u in f.events
                )
                why = (
                    "inf/NaN steps are not skipped"
                    if unscaled
                    else "its gradients come from a scaled backward"
                )
                yield self.diagnostic(
                    model,
                    p.node,
                    f"`{p.optimizer}.step()` bypasses the GradScaler: {why}; "
                    f"use `{s}.step({p.optimizer})` (unscales, skips inf/NaN steps)",
                    self._fix(model, f, p, b, s),
                    p.stmt,
                )

    @staticmethod
    def _source_backward(f, backs, p):
        """The scaled backward whose gradients ``p`` steps, or None."""
        p_loops = set(map(id, p.loops))
        candidates = [
            b for b in backs if b.seq < p.seq and b.co_occurs(p) and p_loops <= set(map(id, b.loops))
        ]
        if not candidates:
            return None
        b = candidates[-1]
        for u in f.events:
            if u.kind in ("backward", "framework_backward") and not u.scaled and b.seq < u.seq < p.seq and u.co_occurs(p) and u.co_occurs(b):
                return None  # p steps the gradients of an unscaled backward
        # p sits in a branch of its own whose test is about AMP (`if not use_amp: opt.step()`)
        for lit in p.ctx.lits - b.ctx.lits:
            if lit.key and amp_ish(lit.key):
                return None
        return b

    def _fix(self, model, f, p, b, s):
        follows = any(
            u.kind == "update" and u.scaler == b.scaler and u.seq > p.seq and u.co_occurs(p) for u in f.events
        )
        extra = b.ctx.lits - p.ctx.lits
        if extra:
            # the scaled backward runs only in one branch (`if scaler is not None:` /
            # `if use_amp:`); the other branch's gradients are plain: step them as before
            guard = branch_guard(model, f, extra)
            if guard is None or not alone_on_line(model, p.stmt) or not isinstance(p.stmt, ast.Expr):
                return None
            body = f"{s}.step({p.optimizer})" + ("" if follows else f"\n    {s}.update()")
            if "\n" in model.text(p.stmt):
                return None
            row, _c, erow, ecol = model.span(p.stmt)
            comment = model.lines[erow - 1][ecol:].rstrip("\r\n")  # `  # the step`, kept
            code = f"if {guard}:\n    {body}\nelse:\n    {model.text(p.stmt)}{comment}"
            return Fix("safe", f"Use `{s}.step({p.optimizer})` where the backward was scaled",
                       (ReplaceStatement(stmt_anchor(model, p.stmt), code),))
        (r, c, er, ec) = model.span(p.node)
        actions = [RewriteCall((r, c), (er, ec), f"{s}.step", (p.optimizer,))]
        if not follows:
            if not simple_stmt(p) or isinstance(p.stmt, ast.Return):
                return None
            actions.append(InsertStatement(stmt_anchor(model, p.stmt), f"{s}.update()"))
        return Fix("safe", f"Use `{s}.step({p.optimizer})`", tuple(actions))
