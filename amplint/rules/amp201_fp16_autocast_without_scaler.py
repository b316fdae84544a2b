from __future__ import annotations

import ast
import re

from amplint.lazyre import lazy
from amplint.diagnostics import Fix, InsertStatement, ReplaceExpression
from amplint.rules._versions import cuda_scaler_ctor
from amplint.rules import Invalid, Rule
from amplint.rules._util import is_simple_call_stmt, stmt_anchor
from amplint.core.autocast import autocast_enabled_off, described, enabled_flag, indirect_fp16_regions, inherited_fp16_training
from amplint.core.grads import without_grad
from amplint.core.typestate import scaler_in_use

FRAMEWORK = lazy(r"accelerator|deepspeed|lightning|fabric|apex|loss_scale|LossScale|mmengine|OptimWrapper")


class Fp16AutocastWithoutScaler(Rule):
    code = "AMP201"
    severity = "error"
    name = "fp16-autocast-without-scaler"
    summary = "A CUDA float16 autocast training loop with no GradScaler"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for a training loop (it calls `backward()` and steps an optimizer) whose forward pass
runs under CUDA autocast with float16, in a file that uses no GradScaler and no framework
that scales the loss (Accelerate, DeepSpeed, Lightning, apex, mmengine). The autocast may be
entered directly, through a variable every assignment of which holds a CUDA float16
`torch.autocast(...)` (`ctx = torch.autocast("cuda") if amp else nullcontext()`, then
`with ctx:`) or a `functools.partial(torch.autocast, "cuda", dtype=torch.float16)`, or
through a project helper that returns one or is a `@contextmanager` entering one, in this
file or another module, whatever the helper's name (`with amp_ctx():`). A GradScaler method
called on an attribute named like a scaler (`context.grad_scaler.scale(loss)`, an object set
up elsewhere) counts as a GradScaler in use. In project mode it also follows a base class in
another module that calls a method inside a CUDA float16 region (`with
torch.cuda.amp.autocast(self.amp): self.step(data)` in `BaseTrainer.iterate()`): a subclass's
`step()` that runs `backward()` and steps the optimizer with no GradScaler, in a file that
uses none, is reported at its backward (not where the method enters a region of its own).

## Why is this bad?
CUDA autocast defaults to float16 (`torch.get_autocast_dtype('cuda')`), whose smallest
normal value is 6e-5: small activation gradients underflow to zero and large ones overflow
to inf, and without a GradScaler nothing rescales them or skips the inf steps. bfloat16 has
float32's range and needs no scaler, so loops with `dtype=torch.bfloat16` (and CPU autocast,
whose default is bfloat16) are not reported.

## Example
```python
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
```

Use instead:
```python
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
```
or `torch.autocast("cuda", dtype=torch.bfloat16)` on hardware that supports it.

## Fix safety
The fix creates `scaler = torch.amp.GradScaler("cuda")` before the outermost loop of the
function and routes the loop's backward, step and update through it, as above. It is
unsafe: it changes the numerics (that is the point), checkpoints do not carry the new
scaler's state, and switching to bfloat16 may be the better choice. It is offered only for
the simple shape: one `loss.backward()` and one `optimizer.step()` in the loop, as whole
statements, no gradient clipping in between, `torch` imported, and a free name for the scaler.
"""
    valid = [
        # the scaler lives on an object the caller set up (context.grad_scaler = GradScaler())
        """
import torch
def train_one_epoch(model, context):
    for x, y in context.train_loader:
        context.optimizer.zero_grad()
        if context.grad_scaler:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            context.grad_scaler.scale(loss).backward()
            context.grad_scaler.step(context.optimizer)
            context.grad_scaler.update()
        else:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            context.optimizer.step()
""",
        # DINO's shape: the scaler is a parameter named fp16_scaler, autocast on when it exists
        """
import torch
def train_one_epoch(model, loader, optimizer, fp16_scaler):
    for x in loader:
        with torch.cuda.amp.autocast(fp16_scaler is not None):
            loss = model(x)
        optimizer.zero_grad()
        if fp16_scaler is None:
            loss.backward()
            optimizer.step()
        else:
            fp16_scaler.scale(loss).backward()
            fp16_scaler.step(optimizer)
            fp16_scaler.update()
""",
        # bf16
        """
import torch
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
""",
        # with a scaler
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        # inference only
        """
import torch
for x in loader:
    with torch.no_grad(), torch.autocast("cuda"):
        preds.append(model(x))
""",
        # CPU autocast (bf16 by default), unknown device
        """
import torch
for x, y in loader:
    with torch.autocast("cpu"):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    with torch.autocast(device_type):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
""",
        # accelerate scales the loss
        """
import torch
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
""",
        # a frozen backbone under no_grad: the trained head runs in fp32
    """
import torch
for x, y in loader:
    with torch.no_grad():
        with torch.autocast("cuda", dtype=torch.float16):
            feats = backbone(x)
    loss = torch.nn.functional.cross_entropy(head(feats.float()), y)
    loss.backward()
    optimizer.step()
""",
    # the plain backward runs only when the autocast is off; the fp16 path uses a scaler helper
    """
import torch
def train_one_epoch(model, loader, optimizer, args, scaler):
    for x in loader:
        with torch.cuda.amp.autocast(args.amp):
            loss = model(x)
        if args.amp:
            scaler(loss, optimizer)
        else:
            loss.backward()
            optimizer.step()
""",
        # a project wrapper entering bfloat16 autocast (its dtype ends in "float16" too)
        """
import torch
def bf16_autocast():
    return torch.autocast("cuda", dtype=torch.bfloat16)
def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        with bf16_autocast():
            loss = model(x)
        loss.backward()
        optimizer.step()
""",
        # a bfloat16 autocast held in a variable
        """
import torch
def train(model, loader, optimizer):
    ctx = torch.autocast("cuda", dtype=torch.bfloat16)
    for x, y in loader:
        optimizer.zero_grad()
        with ctx:
            loss = model(x)
        loss.backward()
        optimizer.step()
""",
    ]
    invalid = [
        # gradient accumulation: backward per micro-batch, the step in the loop around it; the
        # precision picked from a table whose fp16 entry is explicit
        Invalid(
            """
import contextlib
import torch
for x, y in loader:
    opt.zero_grad()
    for xb, yb in zip(x.chunk(4), y.chunk(4)):
        with {
            "bf16": torch.autocast("cuda", dtype=torch.bfloat16),
            "fp16": torch.autocast("cuda", dtype=torch.float16),
            "fp32": contextlib.nullcontext(),
        }[args.precision]:
            loss = loss_fn(model(xb), yb) / 4
        loss.backward()
    opt.step()
""",
        ),
        Invalid(
            """
import torch
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch
def train(model, loader, optimizer):
    for epoch in range(10):
        for x, y in loader:
            with torch.cuda.amp.autocast(enabled=True):
                loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward(retain_graph=True)
            optimizer.step()
""",
            fixed="""
import torch
def train(model, loader, optimizer):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(10):
        for x, y in loader:
            with torch.cuda.amp.autocast(enabled=True):
                loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward(retain_graph=True)
            scaler.step(optimizer)
            scaler.update()
""",
            unsafe=True,
        ),
        # clipping in between: reported, no fix (it would need unscale_ first)
        Invalid(
            """
import torch
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
        ),
        # a float16 autocast held in a variable (one arm of a conditional), or made by a
        # functools.partial, entered in the loop
        Invalid(
            """
import contextlib
import torch
def train(model, loader, optimizer, use_amp):
    ctx = torch.autocast("cuda", dtype=torch.float16) if use_amp else contextlib.nullcontext()
    for x, y in loader:
        optimizer.zero_grad()
        with ctx:
            loss = model(x)
        loss.backward()
        optimizer.step()
""",
        ),
        # a wrapper beside its caller, named for nothing AMP
        Invalid(
            """
import torch
def local_ctx():
    return torch.autocast("cuda", dtype=torch.float16)
def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        with local_ctx():
            loss = model(x)
        loss.backward()
        optimizer.step()
""",
        ),
        Invalid(
            """
import functools
import torch
def train(model, loader, optimizer):
    amp = functools.partial(torch.autocast, "cuda", dtype=torch.float16)
    for x, y in loader:
        optimizer.zero_grad()
        with amp():
            loss = model(x)
        loss.backward()
        optimizer.step()
""",
        ),
    ]

    def check(self, model):
        regions = [(call, f, ctx, stmt, True) for call, f, ctx, stmt in model.autocast_calls]
        regions += indirect_fp16_regions(model)
        inherited = inherited_fp16_training(model)
        if not regions and not inherited:
            return
        if scaler_in_use(model) or FRAMEWORK.search(model.source):
            return  # a scaler (under any name, or through another object) or a framework's own
        for f, base, where, back in inherited:
            yield self.diagnostic(
                model, back.node,
                f"float16 autocast with no GradScaler: `{base}()` ({where}) calls `self.{f.name}()` inside a CUDA "
                "float16 autocast region, and this training step runs `backward()` and steps the optimizer without "
                f"a GradScaler: small gradients underflow to zero and inf/NaN steps are applied; add "
                f"`{cuda_scaler_ctor(model)}` (scale/step/update) or use `dtype=torch.bfloat16`",
                None, back.stmt,
            )
        for call, f, ctx, stmt, direct in regions:
            if not ctx.loops or (direct and autocast_enabled_off(call)):
                continue
            if without_grad(model, f, stmt):
                continue  # a frozen forward: nothing under this autocast is differentiated
            if direct:
                dev, dtype = described(model, call, f)
                if dev != "cuda" or dtype != "float16":
                    continue
            loop = ctx.loops[-1]
            flag = enabled_flag(model, call, f) if direct else None
            backs = [
                e for e in f.events if e.kind == "backward" and loop in e.loops
                and not (flag and any(lit.key == flag and lit.pol is False for lit in e.ctx.lits))
            ]  # not a backward that runs only while the autocast is off (`if not args.amp:`)
            steps = [e for e in f.events if e.kind == "opt_step" and loop in e.loops]
            # gradient accumulation: backward in the micro-batch loop, the step in a loop around it
            outer = [e for e in f.events if e.kind == "opt_step" and any(lp in e.loops for lp in ctx.loops)]
            if not backs or not any(p.seq > b.seq for b in backs for p in outer):
                continue
            fix = self._fix(model, f, ctx, loop, backs, steps) if any(p.seq > b.seq for b in backs for p in steps) else None
            yield self.diagnostic(
                model,
                call,
                "float16 autocast in a training loop with no GradScaler: small gradients underflow to zero and "
                f"inf/NaN steps are applied; add `{cuda_scaler_ctor(model)}` (scale/step/update) or use "
                "`dtype=torch.bfloat16`",
                fix,
                stmt,
            )

    @staticmethod
    def _fix(model, f, ctx, loop, backs, steps):
        """Add a scaler before the outermost loop; route backward/step/update through it."""
        if len(backs) != 1 or len(steps) != 1:
            return None
        b, p = backs[0], steps[0]
        if not (b.seq < p.seq and b.co_occurs(p) and is_simple_call_stmt(b) and is_simple_call_stmt(p)):
            return None
        if b.node.args or not isinstance(b.node.func, ast.Attribute):
            return None
        if any(e.kind in ("clip", "unscale", "zero_grad") and b.seq < e.seq < p.seq for e in f.events):
            return None
        torch_name = next((k for k, v in model.module_scope.items() if v == "torch"), None)
        if torch_name is None:
            return None
        name = next((n for n in ("scaler", "grad_scaler", "amp_scaler") if not re.search(rf"\b{n}\b", model.source)), None)
        if name is None:
            return None
        outer = ctx.loops[0].node
        recv = b.node.func.value
        (r, c, er, ec) = model.span(recv)
        (pr, pc, per, pec) = model.span(p.node)
        ctor = cuda_scaler_ctor(model, torch_name)
        return Fix(
            "unsafe",
            f"Add `{name} = {ctor}` and route backward/step/update through it",
            (
                InsertStatement(stmt_anchor(model, outer), f"{name} = {ctor}", "before"),
                ReplaceExpression((r, c), (er, ec), f"{name}.scale({model.text(recv)})"),
                ReplaceExpression((pr, pc), (per, pec), f"{name}.step({p.optimizer})"),
                InsertStatement(stmt_anchor(model, p.stmt), f"{name}.update()"),
            ),
        )
