from __future__ import annotations

import ast

from amplint.diagnostics import Fix, ReplaceStatement
from amplint.model import frameworks as fw
from amplint.rules import Invalid, Rule
from amplint.rules._util import stmt_anchor

_UNSCALING = ("clip_grad_norm_", "clip_grad_value_", "unscale_gradients")


class AccelerateUnscalePerMicroBatch(Rule):
    code = "AMP402"
    severity = "error"
    name = "accelerate-unscale-per-micro-batch"
    summary = "`accelerator.clip_grad_norm_`/`unscale_gradients` inside `accelerator.accumulate()` without `if accelerator.sync_gradients:`"
    fix_availability = "sometimes"
    preview = True  # no finding on ~30 framework repositories yet: precision unmeasured
    docs = """
## What it does
Checks, where the `Accelerator` is built with fp16 mixed precision and gradient accumulation
(`gradient_accumulation_steps` other than a literal 1, or a `gradient_accumulation_plugin`),
for `accelerator.clip_grad_norm_`, `accelerator.clip_grad_value_` or
`accelerator.unscale_gradients` inside `with accelerator.accumulate(model):` that does not sit
under `if accelerator.sync_gradients:` (or an `if` on an accumulation counter such as
`(step + 1) % accum == 0`).

## Why is this bad?
In accelerate 1.15.0 `unscale_gradients` calls `scaler.unscale_(optimizer)` on every call,
with no `sync_gradients` check, and `clip_grad_norm_`/`clip_grad_value_` call it first; no
version since `accumulate()` arrived (0.11.0) has guarded it, and the documented
`if accelerator.sync_gradients:` pattern entered accelerate's docstrings in 0.13.0 (after
huggingface/accelerate#641 reported this error). On
the micro-batches that only accumulate, `AcceleratedOptimizer.step` does nothing (it runs
`scaler.step` and `scaler.update` only when `sync_gradients` is true), so the second
micro-batch unscales the same optimizer again before any `update()`. Measured with accelerate
1.15.0's code path on CPU, `gradient_accumulation_steps=2`, at the second micro-batch:

```
RuntimeError: unscale_() has already been called on this optimizer since the last update().
```

With the guard, four micro-batches run and each real step unscales once. (Even before that
error, clipping the partial sums of a micro-batch is not clipping the step's gradient.)

## Example
```python
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
```

Use instead:
```python
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
```

## Fix safety
The fix wraps the statement in `if accelerator.sync_gradients:`. It is offered only for a
one-line statement whose value is not kept (`accelerator.clip_grad_norm_(...)` on its own
line: a kept `grad_norm = ...` would be unbound or stale on the other micro-batches). It is
unsafe: where accelerate does not scale (on CPU, under DeepSpeed, or when the launch
configuration overrides the precision) the original code clipped every micro-batch's partial
sum without an error, and the guarded code clips once per step, which changes the result.
"""
    valid = [
        """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
        # the guard and-ed with another condition
        """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=args.accum)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        if accelerator.sync_gradients and args.max_grad_norm > 0:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        optimizer.step()
""",
        # no gradient accumulation: every accumulate() step syncs
        """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
""",
        # bf16 has no scaler: unscale_gradients is a no-op
        """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
""",
    ]
    invalid = [
        Invalid(
            """
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
            fixed="""
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(loss_fn(model(x), y))
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
            unsafe=True,
        ),
        # the norm is kept for logging: flagged, not fixed
        Invalid(
            """
from accelerate import Accelerator
class Trainer:
    def __init__(self, cfg):
        self.accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=cfg.accum)
    def fit(self, loader):
        for batch in loader:
            with self.accelerator.accumulate(self.model):
                self.accelerator.backward(self.model(batch))
                if self.max_grad_norm:
                    gn = self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                self.optimizer.step()
""",
        ),
        # an explicit unscale_gradients, under a CLI default of fp16
        Invalid(
            """
import argparse
from accelerate import Accelerator
p = argparse.ArgumentParser()
p.add_argument("--mixed_precision", type=str, default="fp16")
p.add_argument("--gradient_accumulation_steps", type=int, default=8)
args = p.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision, gradient_accumulation_steps=args.gradient_accumulation_steps)
for x in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(x))
        accelerator.unscale_gradients()
        log_grads(model)
        optimizer.step()
""",
            fixed="""
import argparse
from accelerate import Accelerator
p = argparse.ArgumentParser()
p.add_argument("--mixed_precision", type=str, default="fp16")
p.add_argument("--gradient_accumulation_steps", type=int, default=8)
args = p.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision, gradient_accumulation_steps=args.gradient_accumulation_steps)
for x in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(x))
        if accelerator.sync_gradients:
            accelerator.unscale_gradients()
        log_grads(model)
        optimizer.step()
""",
            unsafe=True,
        ),
    ]

    def check(self, model):
        if not fw.may_be_fp16(model):
            return
        F = fw.facts(model)
        if F is None:
            return
        for fn in F.fns:
            for s in fn.sites:
                if s.attr not in _UNSCALING:
                    continue
                st = F.accelerator_setting(fn, s.receiver)
                if st is None or not st.fp16 or not st.accumulation:
                    continue
                acc_call = fw.in_accumulate(F, s)
                if acc_call is None or model.text(acc_call.func.value) != model.text(s.receiver):
                    continue
                if fw.sync_guarded(s):
                    continue
                acc = model.text(s.receiver)
                fix = None
                stmt = s.stmt
                if (
                    isinstance(stmt, ast.Expr) and stmt.value is s.node
                    and stmt.lineno == getattr(stmt, "end_lineno", stmt.lineno)
                ):
                    fix = Fix(
                        "unsafe",
                        f"Run it only under `if {acc}.sync_gradients:`",
                        (ReplaceStatement(stmt_anchor(model, stmt), f"if {acc}.sync_gradients:\n    {model.text(stmt)}"),),
                    )
                yield self.diagnostic(
                    model,
                    s.node,
                    f"`{acc}.{s.attr}` inside `{acc}.accumulate()` unscales on every micro-batch "
                    f"({st.describe()}); the second one raises \"unscale_() has already been called on this optimizer "
                    f"since the last update()\": run it under `if {acc}.sync_gradients:`",
                    fix,
                    stmt,
                )
