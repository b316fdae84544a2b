from __future__ import annotations

from amplint.model import frameworks as fw
from amplint.rules import Invalid, Rule

_STEP_METHODS = ("training_step", "backward", "compute_loss")


class DoubleLossScaling(Rule):
    code = "AMP404"
    severity = "error"
    name = "double-loss-scaling"
    summary = "A hand-made GradScaler used together with a framework that already scales the loss in fp16"
    fix_availability = "never"
    preview = True  # no finding on ~30 framework repositories yet: precision unmeasured
    docs = """
## What it does
Checks for a `torch.amp.GradScaler` constructed in the file and used where a framework
already does fp16 loss scaling:

* `accelerator.backward(scaler.scale(loss))` (or a name assigned `scaler.scale(loss)`) with an
  fp16 `Accelerator`;
* `engine.backward(scaler.scale(loss))` on a DeepSpeed engine whose config enables fp16;
* `scaler.scale(...)` in `training_step`/`backward` of a `LightningModule` with automatic
  optimization, in a file that sets `precision="16-mixed"` (or `16`);
* `scaler.scale(...)` in a `training_step`/`compute_loss` override of a `transformers.Trainer`
  subclass, in a file that sets `fp16` on the `TrainingArguments` (or branches on it).

## Why is this bad?
The framework multiplies the loss by its own scale (accelerate: `self.scaler.scale(loss).backward()`
in `Accelerator.backward`; Lightning: `MixedPrecision.pre_backward`; DeepSpeed:
`FP16_Optimizer.backward` multiplies by `loss_scale`) and divides only by that scale before
the step. Measured with accelerate 1.15.0's code path on CPU (8-32-1 MLP, SGD lr=0.1):
`accelerator.backward(scaler.scale(loss))` overflows the fp16 activation gradients (the
gradient norm is nan), every step is skipped while accelerate halves its scale, and the
first applied step, after 15 skipped ones, changes the weights by 2.36e3 instead of 0.036
(the hand scaler's 65536 is never divided out). A `training_step` that scales inside
Lightning or the Trainer hands a pre-multiplied loss to the framework in the same way.

## Example
```python
accelerator = Accelerator(mixed_precision="fp16")
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    accelerator.backward(scaler.scale(loss))
    optimizer.step()
```

Use instead:
```python
accelerator = Accelerator(mixed_precision="fp16")
for x, y in loader:
    with accelerator.autocast():
        loss = loss_fn(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
```

## Fix safety
No fix: removing the hand scaler also means removing its `step`/`update`/`unscale_` calls
and its checkpoint state, which is for the user to decide.
"""
    valid = [
        # accelerate without mixed precision and a hand-made AMP loop: one scaler
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="no")
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    accelerator.backward(scaler.scale(loss))
    scaler.step(optimizer)
    scaler.update()
""",
        # Lightning manual optimization with its own scaler under 32-true
        """
import torch
import lightning as L
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.scaler = torch.amp.GradScaler("cuda")
    def training_step(self, batch, i):
        return self.scaler.scale(self.loss(batch))
trainer = L.Trainer(precision="32-true")
""",
        # Lightning's own scaling with 16-mixed: nothing hand-made
        """
import lightning as L
class Lit(L.LightningModule):
    def training_step(self, batch, i):
        return self.loss(batch)
trainer = L.Trainer(precision="16-mixed", gradient_clip_val=1.0)
""",
    ]
    invalid = [
        Invalid(
            """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    accelerator.backward(scaler.scale(loss))
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # DeepSpeed engine with an fp16 config
        Invalid(
            """
import torch
import deepspeed
ds_config = {"train_batch_size": 8, "fp16": {"enabled": True}}
engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
scaler = torch.cuda.amp.GradScaler()
for batch in loader:
    scaled = scaler.scale(engine(batch))
    engine.backward(scaled)
    engine.step()
""",
        ),
        # a LightningModule with automatic optimization under 16-mixed
        Invalid(
            """
import torch
import pytorch_lightning as pl
class Lit(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.scaler = torch.amp.GradScaler("cuda")
    def training_step(self, batch, i):
        loss = self.loss(batch)
        return self.scaler.scale(loss)
trainer = pl.Trainer(precision=16)
""",
        ),
    ]

    def check(self, model):
        if not fw.may_be_fp16(model):
            return
        F = fw.facts(model)
        if F is None:
            return
        scalers = F.scaler_names()
        if not scalers:
            return
        seen = set()
        for fn in F.fns:
            for s in F.sites(fn, "backward"):
                if not s.node.args:
                    continue
                st = F.accelerator_setting(fn, s.receiver)
                what = "accelerate"
                if st is None:
                    st = F.deepspeed_setting(s.receiver)
                    what = "the DeepSpeed engine"
                if st is None or not st.fp16:
                    continue
                sc = F.scaled_expr(s.node.args[0], fn, s.seq, scalers)
                if sc is None or id(sc) in seen:
                    continue
                seen.add(id(sc))
                yield self._diag(model, sc, what, st, f"`{model.text(s.node.func)}`")
        # framework classes whose step methods scale by hand
        pl = F.lightning_setting()
        if pl is not None and pl.fp16:
            for cls in F.lightning_classes():
                if F.manual_optimization(cls):
                    continue
                yield from self._in_methods(model, F, cls, scalers, seen, "Lightning's 16-mixed precision plugin", pl)
        hf = F.hf_setting()
        if hf is not None and hf.fp16:
            for cls in F.trainer_subclasses():
                yield from self._in_methods(model, F, cls, scalers, seen, "the HF Trainer's fp16 (through accelerate)", hf)

    def _in_methods(self, model, F, cls, scalers, seen, what, st):
        for fn in F.methods_of(cls):
            if fn.name not in _STEP_METHODS:
                continue
            for s in F.sites(fn, "scale"):
                if s.receiver is None or model.text(s.receiver) not in scalers or id(s.node) in seen:
                    continue
                seen.add(id(s.node))
                yield self._diag(model, s.node, what, st, f"`{fn.name}`")

    def _diag(self, model, node, what, st, where):
        return self.diagnostic(
            model,
            node,
            f"`{model.text(node)}` hands an already scaled loss to {where}, but {what} scales the loss itself "
            f"({st.describe()}): the gradients are scaled twice (overflow, skipped steps, then updates 65536x too large); "
            f"drop the hand-made GradScaler",
            None,
            getattr(node, "stmt", None),
        )
