from __future__ import annotations

import ast

from amplint.lazyre import lazy
from amplint.model import frameworks as fw
from amplint.rules import Invalid, Rule

_PEFT = ("get_peft_model", "prepare_model_for_kbit_training", "PeftModel", "cast_training_params")
_FP32_RECAST = lazy(r"\.data\s*=.*(?:\.float\(\)|float32)")


class Fp16WeightsUnderFrameworkAmp(Rule):
    code = "AMP403"
    severity = "error"
    name = "fp16-weights-under-framework-amp"
    summary = "A model loaded or cast to float16 is trained under accelerate fp16, Lightning 16-mixed or the HF Trainer's `fp16=True`"
    fix_availability = "never"
    preview = True  # no finding on ~30 framework repositories yet: precision unmeasured
    docs = """
## What it does
Checks for a model loaded or cast to float16 (`from_pretrained(..., torch_dtype=torch.float16)`
or `dtype=`, `.half()`, `.to(torch.float16)`, `.to(dtype=weight_dtype)` where `weight_dtype`
can be float16) whose parameters are then trained under a framework's fp16 loss scaling:

* accelerate: an optimizer built over `model.parameters()` (directly or through a few
  assignments) and `accelerator.prepare(...)` given the model or that optimizer, with
  `mixed_precision` fp16;
* the HF Trainer: `Trainer(model=model, args=args)` with `TrainingArguments(fp16=...)`;
* Lightning: `trainer.fit(model)` with `Trainer(precision="16-mixed")` (or `16`).

Not reported: a cast after the function's training loop (to save or evaluate), a cast in a
branch whose test names training (`if not args.train_text_encoder:`) or rules fp16 out (`if
accelerator.mixed_precision != "fp16":`), and a module frozen
or cast back to float32 before training starts (a cast back after the loop is too late).

A model frozen with `requires_grad_(False)`, files that use peft (`get_peft_model`,
`prepare_model_for_kbit_training`: the adapters are kept in float32) and files that cast
parameters back (`cast_training_params`, `p.data = p.data.float()`, `model.float()`,
`model.to(torch.float32)`) are not reported.

## Why is this bad?
The framework's GradScaler unscales the gradients before every step, and `unscale_`
refuses half-precision gradients. Measured on CPU with accelerate 1.15.0's code path
(`optimizer.step()` and `accelerator.clip_grad_norm_`) and with Lightning 2.6.6's
`MixedPrecision("16-mixed")` plugin, on the first step:

```
ValueError: Attempting to unscale FP16 gradients.
```

Pure fp16 weights would also lose small updates (an fp16 weight of 1.0 ignores any update
below 4.9e-4); mixed precision keeps the trainable weights in float32 and only computes in
float16. diffusers' training scripts load the frozen models in `weight_dtype` and call
`cast_training_params(model, dtype=torch.float32)` on the trained ones for exactly this reason.

## Example
```python
model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer = accelerator.prepare(model, optimizer)
```

Use instead:
```python
model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float32)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer = accelerator.prepare(model, optimizer)
```

## Fix safety
No fix: whether to load in float32, cast only the trainable parameters, or switch to bf16
is the user's choice (memory).
"""
    valid = [
        # the frozen model in fp16, the trained one in fp32 (diffusers' pattern)
        """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
weight_dtype = torch.float16
vae.to(accelerator.device, dtype=weight_dtype)
vae.requires_grad_(False)
optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
unet, optimizer = accelerator.prepare(unet, optimizer)
""",
        # LoRA on an fp16 base, trainable parameters cast back to fp32
        """
import torch
from accelerate import Accelerator
from diffusers.training_utils import cast_training_params
accelerator = Accelerator(mixed_precision="fp16")
unet.to(accelerator.device, dtype=torch.float16)
unet.add_adapter(lora_config)
cast_training_params(unet, dtype=torch.float32)
optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, unet.parameters()), lr=1e-4)
unet, optimizer = accelerator.prepare(unet, optimizer)
""",
        # bf16 weights under bf16: no scaler
        """
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
args = TrainingArguments(output_dir="out", bf16=True)
Trainer(model=model, args=args, train_dataset=ds).train()
""",
        # HF Trainer defaults (no fp16)
        """
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
args = TrainingArguments(output_dir="out")
Trainer(model=model, args=args, train_dataset=ds).train()
""",
        # a cast after the training loop, to save the weights in fp16
        """
import torch
from accelerate import Accelerator
def main(args):
    accelerator = Accelerator(mixed_precision="fp16")
    optimizer = torch.optim.AdamW(controlnet.parameters(), lr=1e-5)
    controlnet, optimizer = accelerator.prepare(controlnet, optimizer)
    for batch in loader:
        loss = controlnet(batch)
        accelerator.backward(loss)
        optimizer.step()
    controlnet = accelerator.unwrap_model(controlnet)
    controlnet.to(torch.float16)
    controlnet.save_pretrained(args.output_dir)
""",
        # the cast runs only when mixed precision is not fp16
        """
import torch
from accelerate import Accelerator
def main(args):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float16 if accelerator.mixed_precision == "fp16" else torch.float32
    if accelerator.mixed_precision != "fp16":
        unet.to(accelerator.device, dtype=weight_dtype)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-5)
    unet, optimizer = accelerator.prepare(unet, optimizer)
""",
        # cast only when the module is not trained
        """
import itertools
import torch
from accelerate import Accelerator
def main(args):
    accelerator = Accelerator(mixed_precision="fp16")
    text_encoder.requires_grad_(args.train_text_encoder)
    if not args.train_text_encoder:
        text_encoder.to(accelerator.device, dtype=torch.float16)
    params = itertools.chain(unet.parameters(), text_encoder.parameters()) if args.train_text_encoder else unet.parameters()
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    unet, text_encoder, optimizer = accelerator.prepare(unet, text_encoder, optimizer)
""",
    ]
    invalid = [
        # a cast back to fp32 after the training loop does not undo the cast before it
        Invalid(
            """
import torch
from accelerate import Accelerator
def main(args):
    accelerator = Accelerator(mixed_precision="fp16")
    transformer.to(accelerator.device, dtype=torch.float16)
    optimizer = torch.optim.AdamW(transformer.parameters(), lr=1e-5)
    transformer, optimizer = accelerator.prepare(transformer, optimizer)
    for batch in loader:
        accelerator.backward(transformer(batch))
        optimizer.step()
    transformer.to(torch.float32)
    transformer.save_pretrained(args.output_dir)
""",
        ),
        # the optimizer trains a submodule's parameters
        Invalid(
            """
import torch
from accelerate import Accelerator
accelerator = Accelerator(mixed_precision="fp16")
net.to(dtype=torch.float16)
optimizer = torch.optim.AdamW(list(net.unet.conv_in.parameters()), lr=1e-5)
net, optimizer = accelerator.prepare(net, optimizer)
""",
        ),
        Invalid(
            """
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer = accelerator.prepare(model, optimizer)
""",
        ),
        # fp16=args.fp16 is an explicit fp16 branch
        Invalid(
            """
import torch
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainer, Seq2SeqTrainingArguments
def main(args):
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model).half()
    targs = Seq2SeqTrainingArguments(output_dir=args.out, fp16=args.fp16)
    trainer = Seq2SeqTrainer(model=model, args=targs, train_dataset=ds)
    trainer.train()
""",
        ),
        # Lightning: a half LightningModule fitted under 16-mixed
        Invalid(
            """
import lightning as L
module = LitModel().half()
trainer = L.Trainer(precision="16-mixed", max_epochs=3)
trainer.fit(module, train_loader)
""",
        ),
        # diffusers-style LoRA without the fp32 cast
        Invalid(
            """
import torch
from accelerate import Accelerator
def main(args):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    unet.requires_grad_(False)
    unet.to(accelerator.device, dtype=weight_dtype)
    unet.add_adapter(unet_lora_config)
    lora_layers = filter(lambda p: p.requires_grad, unet.parameters())
    optimizer = torch.optim.AdamW(lora_layers, lr=args.learning_rate)
    unet, optimizer = accelerator.prepare(unet, optimizer)
""",
        ),
    ]

    def check(self, model):
        if not fw.may_be_fp16(model):
            return
        F = fw.facts(model)
        if F is None or any(t in model.source for t in _PEFT) or _FP32_RECAST.search(model.source):
            return
        for fn in F.fns:
            casts = list(fw.half_casts(F, fn))
            if not casts:
                continue
            span = fw.training_span(fn)
            ifs = [n for n in ast.walk(fn.node) if isinstance(n, ast.If)] if isinstance(fn.node, ast.AST) else []
            for name, node, stmt, seq in casts:
                if span is not None and stmt.lineno > span[1]:
                    continue  # after the training loop: a cast for saving or inference
                if fw.under_frozen_branch(ifs, stmt):
                    continue
                if fw.recast_or_frozen(F, fn, name, seq, node, span):
                    continue
                how = fw.trained_under(F, fn, name)
                if how is None:
                    continue
                yield self.diagnostic(
                    model,
                    node,
                    f"`{name}` is cast to float16 here and its parameters are trained under {how}: the framework's "
                    f"GradScaler raises \"ValueError: Attempting to unscale FP16 gradients.\" on the first step; keep the "
                    f"trainable parameters in float32 (load in float32, or cast them back with "
                    f"`cast_training_params({name}, dtype=torch.float32)`)",
                    None,
                    stmt,
                )
