from __future__ import annotations

import ast

from amplint.diagnostics import Fix, InsertStatement, ReplaceStatement, RewriteCall
from amplint.core import cfg
from amplint.core.grads import GradStates, helper_backwards, lambda_steps, loop_steps
from amplint.model import amp_ish
from amplint.model.queries_extra import in_conditional_expression
from amplint.rules import Invalid, Rule
from amplint.rules._util import alone_on_line, branch_guard, scaler_text, simple_stmt, stmt_anchor


class OptimizerStepBypassesScaler(Rule):
    code = "AMP004"
    severity = "error"
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

The scaled gradients are followed over the control flow: they reach every later plain step
until a `zero_grad()` clears them or a plain backward adds to them (then the mix is unknown:
silent), whatever `scaler.update()` runs in between, and round a loop (a step at the top of
the loop applies the previous pass's scaled gradients). Branches are understood: `if
use_amp: scaler.step(opt) else: opt.step()`, early returns and `continue`s, and framework
backward calls (`accelerator.backward(loss)`, Lightning's `manual_backward`) are not
reported. The scaled backward may run in a project helper handed the scaler
(`train_step(model, optim, batch, scaler)` whose summary scales with it): a plain
`z_optim.step()` after that call is reported (no fix is offered there); a helper that runs a
plain backward of its own in between ends the scaled gradients' reach.

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
then calls the same `optimizer.step()`. No fix is offered where the scaled gradients reach
the step only from the previous pass (a step at the top of the loop): on the first pass
`scaler.step()` would run before any `scaler.scale()` and raise `AssertionError: Attempted
step but _scale is None.` (measured, torch 2.13 CPU).
"""
    valid = [
        # a second, fp32 optimizer: its own loss is back-propagated unscaled before the scaled
        # backward, and the scaler steps the other optimizer
        """
import torch
def train(model, critic, loader, opt, opt_critic, scaler):
    for x, y in loader:
        opt.zero_grad()
        opt_critic.zero_grad()
        critic(x.float()).mean().backward()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt_critic.step()
""",
        # a helper runs its own plain backward between the scaled one and the step
        """
import torch
def d_step(disc, opt_d, x, scaler):
    scaler.scale(disc(x).mean()).backward()
    scaler.step(opt_d)
    scaler.update()
def g_step(gen, x):
    gen(x).mean().backward()
def main(disc, gen, opt_d, opt_g, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        d_step(disc, opt_d, x, scaler)
        g_step(gen, x)
        opt_g.step()
""",
        # the plain step runs only without a scaler
        """
import torch
def train_step(model, optim, x, scaler):
    loss = model(x)
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()
def main(model, optim, loader, amp):
    scaler = torch.amp.GradScaler("cuda") if amp else None
    for x in loader:
        train_step(model, optim, x, scaler)
        if scaler is None:
            optim.step()
        else:
            scaler.step(optim)
            scaler.update()
""",
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
        # an unscaled auxiliary backward does not excuse the only optimizer's plain step
        Invalid(
            """
import torch
def train(model, aux, loader, opt, scaler):
    for x, y in loader:
        aux(x).mean().backward()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        opt.step()
        scaler.update()
""",
            """
import torch
def train(model, aux, loader, opt, scaler):
    for x, y in loader:
        aux(x).mean().backward()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
""",
        ),
        # the scaled backward runs in a helper; the caller steps a second optimizer itself
        Invalid(
            """
import torch
def train_step(model, optim, x, scaler):
    loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(optim)
    scaler.update()
def main(model, optim, z_optim, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        z_optim.zero_grad()
        train_step(model, optim, x, scaler)
        z_optim.step()
""",
        ),
        # a plain step of each optimizer in a loop over the optimizers: reported, no fix
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    for o in optimizers:
        o.step()
        o.zero_grad()
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    for opt in [opt_enc, opt_dec]:
        opt.step()
""",
        ),
        # a plain step at the top of the loop applies the previous pass's scaled gradients: no
        # fix (on the first pass `scaler.step()` would run before any `scale()`)
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.step()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
""",
        ),
        # a lambda used as the step
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
step_fn = lambda: optimizer.step()
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    step_fn()
""",
        ),
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
        """A plain step that the live gradients of a scaled backward reach (the core's gradient
        state, ``live``: no ``zero_grad()`` nor later plain backward between, on some path)."""
        lambdas = lambda_steps(model)
        for f in model.funcs:
            steps = [p for p in [*f.events, *loop_steps(model, f), *lambdas.get(f.fid, ())]
                     if p.kind == "opt_step" and not in_conditional_expression(p)]
            if not steps:
                continue  # (`scaler.step(opt) if use_amp else opt.step()`: a branch the model does not split)
            via = helper_backwards(model, f)  # helpers are resolved only where a plain step can be judged
            keys = {e.scaler for e in [*f.events, *via] if e.kind == "backward" and e.scaled}
            if not keys:
                continue
            plain = [e for e in f.events if e.kind in ("backward", "framework_backward") and not e.scaled]
            clears = [e for e in f.events if e.kind == "zero_grad"]
            graph = cfg.of(f)
            states = [GradStates(model, f, k, (), graph, plain, clears, live=True, marks=steps, backs=via) for k in keys]
            for p in steps:
                # loops over the optimizers do not separate the step from the backward
                loops = {id(lp) for lp in p.loops if not p.optimizer or _root(p.optimizer) not in lp.targets}
                hit = next(((st, b) for st in states if (b := st.live_at(p, loops)) is not None), None)
                if hit is None or any(lit.key and amp_ish(lit.key) for lit in p.ctx.lits - hit[1].ctx.lits):
                    continue  # (p in a branch of its own about AMP: `if not use_amp: opt.step()`)
                st, b = hit
                s = scaler_text(model, f, b.scaler)
                helper = b.extra.get("helper")
                why = (
                    "inf/NaN steps are not skipped"
                    if st.unscaled_for(p)
                    else f"its gradients come from the scaled backward in `{helper}()` (line {b.node.lineno})"
                    if helper
                    else f"its gradients come from the previous pass's scaled backward (line {b.node.lineno})"
                    if b.seq > p.seq
                    else "its gradients come from a scaled backward"
                )
                where = p.extra.get("report")
                yield self.diagnostic(
                    model,
                    where if where is not None else p.node,
                    f"`{p.optimizer}.step()` bypasses the GradScaler: {why}; "
                    f"use `{s}.step({p.optimizer})` (unscales, skips inf/NaN steps)"
                    + (f", before the `update()` in `{helper}()`" if helper and b.extra.get("updates") else ""),
                    # (a backward that reaches the step only from the previous pass: on the first pass
                    # `scaler.step()` would run before any `scale()` and raise)
                    None if p.extra.get("nofix") or helper or _in_optimizer_loop(p) or b.seq > p.seq
                    else self._fix(model, f, p, b, s),
                    p.extra.get("report_stmt", p.stmt),
                    why=(
                        (b.node.lineno, "scaled backward" + (f" in `{helper}()`" if helper else "")
                         + ": its gradients stay in `.grad` (`update()` does not clear them)"),
                        (p.node.lineno, f"`{p.optimizer}.step()` reached with them on some path"
                         + (" round the loop" if b.seq > p.seq else "") + ", no `zero_grad()` nor plain backward between"),
                    ),
                )

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


def _root(text: str) -> str:
    return text.split(".", 1)[0].split("[", 1)[0]


def _in_optimizer_loop(p) -> bool:
    """The step sits in a loop over the optimizers (an inserted update would run per optimizer)."""
    return bool(p.optimizer) and any(_root(p.optimizer) in lp.targets for lp in p.loops)
