from __future__ import annotations

import re

from amplint.lazyre import lazy
from amplint.rules import Invalid, Rule
from amplint.core.autocast import described
from amplint.rules._util import scaler_disabled, scaler_text


# FP8 training (MS-AMP, Transformer Engine, torchao float8) keeps low-precision gradients that
# do need the scaler even when the surrounding autocast is bf16.
FP8 = lazy(r"msamp|transformer_engine|float8|fp8", re.IGNORECASE)


class ScalerWithBfloat16(Rule):
    code = "AMP203"
    severity = "warning"
    name = "scaler-with-bfloat16"
    summary = "A GradScaler driving a loop whose autocast is bfloat16 only (not needed)"
    default = False
    docs = """
## What it does
Checks for a `GradScaler` that scales the loss of a loop whose autocast regions all use
`dtype=torch.bfloat16`. Info-level and off by default: enable it with
`--extend-select AMP203`.

## Why is this bad?
It is not wrong, only unnecessary: bfloat16 has float32's exponent range, so gradients do
not underflow and a bf16 loop never overflows naturally (measured: no skipped step in 100
seeds). The scaler costs an unscale pass and an inf check per step and, at the default
65536 start, can still skip steps when the scaled loss itself overflows. The same holds for
a model converted with `model.bfloat16()`, where the scaler checks nothing at all.

Files that train in FP8 (MS-AMP, Transformer Engine, torchao float8) are not reported: their
low-precision gradients still need loss scaling under a bf16 autocast.

## Example
```python
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = loss_fn(model(x), y)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = loss_fn(model(x), y)
loss.backward()
optimizer.step()
```
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""",
        # dtype chosen at run time
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
for x in loader:
    with torch.autocast("cuda", dtype=dtype):
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""",
    ]
    valid.append(
        """
import torch, msamp
model, optimizer = msamp.initialize(model, optimizer, opt_level="O2")
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    )
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""",
        ),
    ]

    def check(self, model):
        fp8 = None  # the file-wide FP8 search is paid only when there is something to report
        for f in model.funcs:
            scales = [e for e in f.events if e.kind == "scale" or (e.kind == "backward" and e.scaled)]
            if not scales:
                continue
            regions = [(c, ctx) for c, g, ctx, _s in model.autocast_calls if g is f]
            if not regions:
                continue
            if any(described(model, c, f)[1] != "bfloat16" for c, _ in regions):
                continue
            e = scales[0]
            if scaler_disabled(model, e.scaler):
                continue
            if fp8 is None:
                fp8 = FP8.search(model.source) is not None
            if fp8:
                return
            st = scaler_text(model, f, e.scaler)
            yield self.diagnostic(
                model,
                e.node,
                f"`{st}` scales a loss computed under bfloat16 autocast only; bfloat16 has float32's range, "
                f"so the GradScaler is not needed",
                None,
                e.stmt,
            )
