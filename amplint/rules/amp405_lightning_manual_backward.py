from __future__ import annotations

import ast

from amplint.diagnostics import Fix, ReplaceExpression
from amplint.model import frameworks as fw
from amplint.rules import Invalid, Rule


class LightningManualBackward(Rule):
    code = "AMP405"
    severity = "error"
    name = "lightning-manual-backward"
    summary = "`loss.backward()` instead of `self.manual_backward(loss)` in a manually optimized LightningModule under 16-mixed"
    fix_availability = "sometimes"
    preview = True  # no finding on ~30 framework repositories yet: precision unmeasured
    docs = """
## What it does
Checks a `LightningModule` with `self.automatic_optimization = False`, in a file that builds
its `Trainer` with `precision="16-mixed"` (or `16`, `"16"`, or an explicit fp16 branch), for
`loss.backward()` or `torch.autograd.backward(loss)` in `training_step` instead of
`self.manual_backward(loss)`.

## Why is this bad?
Under 16-mixed, Lightning's `MixedPrecision` plugin scales the loss only inside
`manual_backward` (`pre_backward` calls `scaler.scale`), but every `opt.step()` of a
`LightningOptimizer` goes through `MixedPrecision.optimizer_step`, which calls
`scaler.unscale_(optimizer)` and `scaler.step`. Measured with Lightning 2.6.6 on CPU (the
`MixedPrecision("16-mixed", "cpu")` plugin), the first `opt.step()` after a plain
`loss.backward()` raises

```
AssertionError: Attempted unscale_ but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration.
```

and where another `manual_backward` has already initialised the scale, the unscale divides
gradients that were never scaled by 65536: the update is 65536x too small. With
`self.manual_backward(loss)` the same step changes the weights by 0.036, as in automatic
optimization. (On CPU, `Trainer(accelerator="cpu", precision="16-mixed")` itself warns
"AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead.")

## Example
```python
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        loss = self.loss(batch)
        loss.backward()
        opt.step()

trainer = L.Trainer(precision="16-mixed")
```

Use instead:
```python
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        loss = self.loss(batch)
        self.manual_backward(loss)
        opt.step()
```

## Fix safety
The fix rewrites `loss.backward(args)` to `self.manual_backward(loss, args)` (Lightning
forwards the extra arguments to `backward`). It is safe: in manual optimization
`manual_backward` is Lightning's documented backward for every precision (it scales under
16-mixed, runs the `on_before_backward`/`on_after_backward` hooks and the strategy's backward);
offered only in `training_step` itself and not for `torch.autograd.backward(...)`.
"""
    valid = [
        """
import lightning as L
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        self.manual_backward(self.loss(batch))
        opt.step()
trainer = L.Trainer(precision="16-mixed")
""",
        # automatic optimization with gradient clipping: Lightning does it right
        """
import lightning as L
class Lit(L.LightningModule):
    def training_step(self, batch, batch_idx):
        return self.loss(batch)
trainer = L.Trainer(precision="16-mixed", gradient_clip_val=1.0)
""",
        # bf16: no scaler
        """
import lightning as L
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        self.loss(batch).backward()
        opt.step()
trainer = L.Trainer(precision="bf16-mixed")
""",
    ]
    invalid = [
        Invalid(
            """
import lightning as L
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        loss = self.loss(batch)
        loss.backward(retain_graph=True)
        opt.step()
trainer = L.Trainer(precision="16-mixed")
""",
            fixed="""
import lightning as L
class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        loss = self.loss(batch)
        self.manual_backward(loss, retain_graph=True)
        opt.step()
trainer = L.Trainer(precision="16-mixed")
""",
        ),
        # the precision comes from a CLI default; torch.autograd.backward: flagged, not fixed
        Invalid(
            """
import argparse
import torch
import pytorch_lightning as pl
class GAN(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
    def training_step(self, batch, batch_idx):
        g_opt, d_opt = self.optimizers()
        torch.autograd.backward(self.g_loss(batch))
        g_opt.step()
parser = argparse.ArgumentParser()
parser.add_argument("--precision", default="16-mixed")
args = parser.parse_args()
pl.Trainer(precision=args.precision).fit(GAN())
""",
        ),
    ]

    def check(self, model):
        if not fw.may_be_fp16(model):
            return
        F = fw.facts(model)
        if F is None:
            return
        st = F.lightning_setting()
        if st is None or not st.fp16:
            return
        for cls in F.lightning_classes():
            if not F.manual_optimization(cls):
                continue
            for fn in F.methods_of(cls):
                if fn.name != "training_step" or not fn.self_name:
                    continue
                for s in fn.sites:
                    q = F.callee(s.node) or ""
                    if q == "torch.autograd.backward" and s.node.args:
                        yield self._diag(model, s, fn, st, model.text(s.node.args[0]), None)
                    elif s.attr == "backward" and s.receiver is not None:
                        r = s.receiver
                        if isinstance(r, ast.Name) and r.id == fn.self_name:
                            continue  # self.backward(...): Lightning's hook
                        if isinstance(r, ast.Call) and isinstance(r.func, ast.Attribute) and r.func.attr == "scale":
                            continue  # a hand-made scaler (AMP404 territory)
                        if q.startswith("torch.") and q != "torch.autograd.backward":
                            continue
                        yield self._diag(model, s, fn, st, model.text(r), self._fix(model, s, fn))

    def _fix(self, model, s, fn):
        call = s.node
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        extra = [model.text(a) for a in call.args] + [
            (f"{k.arg}={model.text(k.value)}" if k.arg else f"**{model.text(k.value)}") for k in call.keywords
        ]
        recv = model.text(s.receiver)
        if isinstance(s.receiver, (ast.Lambda, ast.NamedExpr, ast.GeneratorExp, ast.Starred)):
            return None
        code = f"{fn.self_name}.manual_backward({', '.join([recv] + extra)})"
        r, c, er, ec = model.span(call)
        return Fix("safe", f"Use `{fn.self_name}.manual_backward({recv})`", (ReplaceExpression((r, c), (er, ec), code),))

    def _diag(self, model, s, fn, st, loss_text, fix):
        return self.diagnostic(
            model,
            s.node,
            f"`{model.text(s.node)}` in a manually optimized LightningModule under 16-mixed ({st.describe()}): the "
            f"loss is not scaled, but `opt.step()` unscales the gradients (an AssertionError on the first step, "
            f"else updates 65536x too small); use `{fn.self_name}.manual_backward({loss_text})`",
            fix,
            s.stmt,
        )
