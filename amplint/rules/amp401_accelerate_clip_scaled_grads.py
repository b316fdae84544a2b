from __future__ import annotations

import ast

from amplint.diagnostics import Fix, ReplaceExpression
from amplint.model import frameworks as fw
from amplint.rules import Invalid, Rule

# accelerate's replacements take the same leading arguments (accelerate 1.15.0:
# clip_grad_norm_(parameters, max_norm, norm_type=2), clip_grad_value_(parameters, clip_value))
_REPLACEABLE = {"clip_grad_norm_": ({"parameters", "max_norm", "norm_type"}, 3), "clip_grad_value_": ({"parameters", "clip_value"}, 2)}


class AccelerateClipScaledGrads(Rule):
    code = "AMP401"
    severity = "error"
    name = "accelerate-clip-scaled-grads"
    summary = "`torch.nn.utils.clip_grad_norm_` (or a gradient norm) after `accelerator.backward()` under fp16 without unscaling"
    fix_availability = "sometimes"
    preview = True  # no finding on ~30 framework repositories yet: precision unmeasured
    docs = """
## What it does
Checks, where the `Accelerator` is built with fp16 mixed precision, for
`torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`, `get_total_norm` or a gradient norm read
(`p.grad.norm()`, `torch.norm(...)` over `.grad` or a list of them) between `accelerator.backward(loss)` and `optimizer.step()` with no
`accelerator.unscale_gradients()` (or `accelerator.clip_grad_norm_`) before it.

The precision must be known from the file: a literal `mixed_precision="fp16"`, a config dict
or command-line default of the same file, or an explicit fp16 branch
(`"fp16" if args.fp16 else "no"`, `if accelerator.mixed_precision == "fp16":`). An
`Accelerator()` configured by `accelerate launch`, bf16 or no mixed precision: silent.

## Why is this bad?
With fp16, `accelerator.backward(loss)` is `scaler.scale(loss).backward()` (accelerate
1.15.0, `Accelerator.backward`): until `AcceleratedOptimizer.step` calls `scaler.step`, the
gradients are multiplied by the loss scale (65536 at the start). torch's clip then measures
the scaled norm and clips at `max_norm / scale`. Measured with accelerate 1.15.0's code path
on CPU (an 8-32-1 MLP, SGD lr=0.1, `max_norm=1.0`): `torch.nn.utils.clip_grad_norm_` returns a
total norm of 47740.7 and the step changes the weights by at most 7.5e-07;
`accelerator.clip_grad_norm_` returns 0.728 and the step changes them by 0.036. Training
stalls silently and the logged gradient norm is 65536x too large.

## Example
```python
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    loss = loss_fn(model(x), y)
    accelerator.backward(loss)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
```

Use instead:
```python
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    loss = loss_fn(model(x), y)
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
```

## Fix safety
The fix replaces `torch.nn.utils.clip_grad_norm_`/`clip_grad_value_` by the accelerator's
method with the same arguments. It is offered only where the clip runs once per real
optimizer step: under `if accelerator.sync_gradients:`, or outside `accelerator.accumulate()`
and under every condition the following `optimizer.step()` is under, not in a loop of its
own, and the only clip of that step (accelerate's clip unscales every prepared optimizer, and
a second unscale before the step raises). It is unsafe: what accelerate's clip does depends on
the launch configuration the file does not show (under DeepSpeed it only returns the norm,
and `clip_grad_value_` raises under DeepSpeed and FSDP). `get_total_norm`, gradient reads
and calls with other keyword arguments (`error_if_nonfinite`, `foreach`) get no fix.
"""
    valid = [
        # the norm over the grads after unscale_gradients
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
for batch in loader:
    accelerator.backward(model(batch))
    accelerator.unscale_gradients()
    total = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
    log(total)
    optimizer.step()
    optimizer.zero_grad()
""",
        # accelerator.clip_grad_norm_ under sync_gradients (accelerate's own pattern)
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
        # explicit unscale_gradients first
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    accelerator.unscale_gradients(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
        # bf16: nothing is scaled
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="bf16")
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
        # precision from `accelerate launch`: unknown, silent
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator()
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
    ]
    invalid = [
        # a gradient norm over the collected grads (it picks the clip threshold)
        Invalid(
            """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
for batch in loader:
    accelerator.backward(model(batch))
    if accelerator.sync_gradients:
        grads = [p.grad for p in params if p.grad is not None]
        total = torch.norm(torch.stack([torch.norm(g.detach(), 2) for g in grads]), 2)
        accelerator.clip_grad_norm_(params, max_norm if total < 10 * max_norm else max_norm / 10)
    optimizer.step()
    optimizer.zero_grad()
""",
        ),
        Invalid(
            """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
""",
            fixed="""
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
""",
            unsafe=True,
        ),
        # the command-line default is fp16; under sync_gradients inside accumulate: fixable
        Invalid(
            """
import argparse
from torch.nn.utils import clip_grad_norm_
from accelerate import Accelerator
parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default="fp16", choices=["no", "fp16", "bf16"])
def train(args, model, optimizer, loader):
    accelerator = Accelerator(mixed_precision=args.mixed_precision, gradient_accumulation_steps=2)
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            if accelerator.sync_gradients:
                grad_norm = clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
""",
            fixed="""
import argparse
from torch.nn.utils import clip_grad_norm_
from accelerate import Accelerator
parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default="fp16", choices=["no", "fp16", "bf16"])
def train(args, model, optimizer, loader):
    accelerator = Accelerator(mixed_precision=args.mixed_precision, gradient_accumulation_steps=2)
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            if accelerator.sync_gradients:
                grad_norm = accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
""",
            unsafe=True,
        ),
        # inside accumulate without the guard: flagged, not fixed (accelerate's clip would
        # unscale on every micro-batch, see AMP402)
        Invalid(
            """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16" if use_fp16 else "no", gradient_accumulation_steps=2)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
""",
        ),
        # a logged gradient norm: flagged, not fixed
        Invalid(
            """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
for x, y in loader:
    accelerator.backward(loss_fn(model(x), y))
    norms = [p.grad.norm() for p in model.parameters()]
    optimizer.step()
""",
        ),
    ]

    def check(self, model):
        if not fw.may_be_fp16(model):
            return
        F = fw.facts(model)
        if F is None:
            return
        for fn in F.fns:
            backs = []
            for s in F.sites(fn, "backward"):
                st = F.accelerator_setting(fn, s.receiver)
                if st is not None and st.fp16 and s.node.args and not fw.other_engine(st):
                    backs.append((s, st))
            if not backs:
                continue
            reads = [s for s in fn.sites if F.is_clip(s.node) or fw.grad_norm_read(s) or fw.norm_of_grads(fn, s)]
            for c in reads:
                cands = [(b, st) for b, st in backs if b.seq < c.seq and not b.exclusive_with(c) and fw.prefix(b.loops, c.loops)]
                if not cands:
                    continue
                b, st = cands[-1]
                steps = [
                    s for s in fn.sites
                    if fw.optimizer_step(s) and s.seq > c.seq and not s.exclusive_with(c) and not s.exclusive_with(b)
                    and fw.prefix(s.loops, c.loops) and fw.prefix(b.loops, s.loops)
                ]
                if not steps:
                    continue
                step = steps[0]
                if fw.unscaled_between(F, fn, b, c):
                    continue
                acc = model.text(b.receiver)
                is_read = not F.is_clip(c.node)
                label = f"`{model.text(c.node.func)}()`" if is_read else f"`{model.text(c.node.func).rsplit('.', 1)[-1]}`"
                fix = None if is_read else self._fix(model, F, fn, acc, b, c, step)
                yield self.diagnostic(
                    model,
                    c.node,
                    f"{label} after `{acc}.backward()` sees gradients still multiplied by accelerate's fp16 loss scale "
                    f"({st.describe()}); use `{acc}.clip_grad_norm_(...)`, which unscales first",
                    fix,
                    c.stmt,
                )

    @staticmethod
    def _fix(model, F, fn, acc, b, c, step):
        name = (F.callee(c.node) or "").rsplit(".", 1)[-1]
        if name not in _REPLACEABLE:
            return None
        allowed, npos = _REPLACEABLE[name]
        call = c.node
        if len(call.args) > npos or any(k.arg is None or k.arg not in allowed for k in call.keywords):
            return None
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if c.loops != step.loops:
            return None
        once = fw.sync_guarded(c)
        if not once:
            if fw.in_accumulate(F, c) is not None:
                return None
            mine = {(id(n), arm) for n, arm in c.ifs}
            if not all((id(n), arm) in mine for n, arm in step.ifs):
                return None
            once = True
        others = [
            s for s in fn.sites
            if s is not c and b.seq < s.seq < step.seq and not s.exclusive_with(c)
            and (F.is_clip(s.node) or s.attr in ("clip_grad_norm_", "clip_grad_value_", "unscale_gradients"))
        ]
        if others:
            return None
        r, col, er, ec = model.span(call.func)
        return Fix(
            "unsafe",
            f"Use `{acc}.{name}`",
            (ReplaceExpression((r, col), (er, ec), f"{acc}.{name}"),),
        )
