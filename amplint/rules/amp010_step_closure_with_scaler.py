from __future__ import annotations

import ast

from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled, scaler_text


def _closure_arg(call: ast.Call, positional_index: int):
    for kw in call.keywords:
        if kw.arg == "closure":
            return kw.value, True
    if len(call.args) > positional_index and not isinstance(call.args[positional_index], ast.Starred):
        return call.args[positional_index], False
    return None, False


def _forwarded_default(func, closure) -> bool:
    """``closure`` is a parameter of ``func`` that defaults to None (an optimizer wrapper's
    ``step(closure=None)``): whether a closure ever arrives is up to its callers."""
    if isinstance(closure, ast.Constant) and closure.value is None:
        return True
    if not isinstance(closure, ast.Name) or closure.id not in func.params:
        return False
    node = func.node
    args = getattr(node, "args", None)
    if args is None:
        return False
    pos = [*args.posonlyargs, *args.args]
    pairs = list(zip(reversed(pos), reversed(args.defaults))) + [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None
    ]
    return any(a.arg == closure.id and isinstance(d, ast.Constant) and d.value is None for a, d in pairs)


class StepClosureWithScaler(Rule):
    code = "AMP010"
    severity = "error"
    name = "step-closure-with-scaler"
    summary = "An optimizer closure (LBFGS-style `step(closure)`) combined with an enabled GradScaler"
    docs = """
## What it does
Checks for an optimizer closure used together with a GradScaler:

* `scaler.step(optimizer, closure)` or `scaler.step(optimizer, closure=closure)` on a scaler
  that is not constructed with `enabled=False`;
* `optimizer.step(closure)` whose closure (a function of this file or a lambda) runs
  `scaler.scale(loss).backward()`.

## Why is this bad?
GradScaler does not support closures.

* `scaler.step(opt, closure=c)` raises
  `RuntimeError: Closure use is not currently supported if GradScaler is enabled.`
* Passed positionally, `scaler.step(opt, c)` slips past that check: the closure is handed to
  `optimizer.step(c)`, which runs it again after the inf check, so the step uses whatever
  gradients the closure leaves. A closure with `scaler.scale(loss).backward()` leaves scaled
  gradients: measured with SGD, update norm 5427 instead of 0.0828 (65536x).
* `optimizer.step(closure)` with a scaled backward in the closure never unscales and never
  checks for inf/NaN: SGD's update is 65536x too large (loss 4.1e12 after one step instead
  of 1.09); LBFGS normalises its first step and lands near the right point, but an
  overflowing iteration hands inf gradients to the optimizer, and a later
  `scaler.update()` raises `No inf checks were recorded prior to update.`

Not reported: an optimizer wrapper's `def step(self, closure=None)` that forwards its
argument (`self.scaler.step(self.optimizer, closure)`: its callers decide), closures with a
disabled scaler (`GradScaler(enabled=False)` forwards the
closure to `optimizer.step`), closures that run a plain `loss.backward()` without a scaler,
and `step(...)` calls of schedulers and other objects whose argument is not a function of
this file.

## Example
```python
optimizer = torch.optim.LBFGS(model.parameters())

def closure():
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    return loss

scaler.step(optimizer, closure)
scaler.update()
```

Use instead:
```python
# a closure optimizer needs unscaled gradients: bf16 autocast needs no scaler
```
```python
def closure():
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    loss.backward()
    return loss

optimizer.step(closure)
```

## Fix safety
No fix: the remedy (drop the scaler, switch to bf16, or restructure the closure) is a
design choice.
"""
    valid = [
        # an optimizer wrapper forwarding its optional closure
        """
import torch
class AmpOptimizer:
    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def step(self, closure=None):
        self.scaler.step(self.optimizer, closure)
        self.scaler.update()
""",
        # a disabled scaler forwards the closure
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=False)
def closure():
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    return loss
for x, y in loader:
    scaler.step(optimizer, closure)
    scaler.update()
""",
        # a closure without a scaler, next to a scaler used elsewhere
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def closure():
    lbfgs.zero_grad()
    loss = loss_fn(head(x), y)
    loss.backward()
    return loss
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    lbfgs.step(closure)
""",
        # scheduler.step(epoch), ema.step(model): not closures
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for epoch in range(10):
    for x, y in loader:
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
    scheduler.step(epoch)
""",
    ]
    invalid = [
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
def closure():
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    return loss
for x, y in loader:
    scaler.step(optimizer, closure=closure)
    scaler.update()
""",
        ),
        # positional: passes the check, runs the scaled closure again
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
def closure():
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    return loss
for x, y in loader:
    scaler.step(optimizer, closure)
    scaler.update()
""",
        ),
        # optimizer.step(closure) with a scaled backward inside
        Invalid(
            """
import torch
class Trainer:
    def __init__(self, model):
        self.scaler = torch.amp.GradScaler("cuda")
        self.optimizer = torch.optim.LBFGS(model.parameters())

    def train_step(self, x, y):
        def closure():
            self.optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = self.loss_fn(self.model(x), y)
            self.scaler.scale(loss).backward()
            return loss
        self.optimizer.step(closure)
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.step(lambda: scaler.scale(loss_fn(model(x), y)).backward())
""",
        ),
    ]

    def check(self, model):
        for e in model.events("step"):
            call = e.node
            if not isinstance(call, ast.Call):
                continue
            closure, by_kw = _closure_arg(call, 1)
            if closure is None or scaler_disabled(model, e.scaler):
                continue
            if _forwarded_default(e.func, closure):
                continue  # a wrapper's `def step(self, closure=None)` passing its argument on
            st = scaler_text(model, e.func, e.scaler)
            if by_kw:
                why = "raises \"RuntimeError: Closure use is not currently supported if GradScaler is enabled.\""
            else:
                why = (
                    "passes a closure positionally: it slips past GradScaler's closure check and "
                    "`optimizer.step` re-runs it after the inf check (a scaled backward in it leaves 65536x gradients)"
                )
            yield self.diagnostic(
                model, call, f"`{st}.step()` with a closure {why}; GradScaler does not support closures", None, e.stmt
            )
        for f in model.funcs:
            for mc in f.methods:
                if not mc.called or mc.attr != "step" or model.is_scaler(mc.receiver):
                    continue
                call = mc.node
                closure, _kw = _closure_arg(call, 0)
                if closure is None:
                    continue
                sk = self._scaled_in(model, f, closure)
                if sk is None or scaler_disabled(model, sk):
                    continue
                st = scaler_text(model, f, sk) if any(ev.scaler == sk for ev in f.events) else str(sk[-1])
                yield self.diagnostic(
                    model,
                    call,
                    f"`{model.text(call.func)}(closure)` runs a closure with `{st}.scale(loss).backward()`: the "
                    f"gradients are never unscaled nor checked for inf/NaN (SGD steps 65536x too far); "
                    f"GradScaler does not support closures",
                    None,
                    mc.stmt,
                )

    @staticmethod
    def _scaled_in(model, f, closure):
        if isinstance(closure, ast.Lambda):
            for n in ast.walk(closure.body):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "scale":
                    k = model.key_of_expr(n.func.value, f)
                    if model.is_scaler(k):
                        return k
            return None
        if not isinstance(closure, (ast.Name, ast.Attribute)):
            return None
        callee = model.resolve_callee_expr(closure, f)
        if callee is None or not callee.walked:
            return None
        for ev in callee.events:
            if ev.kind == "backward" and ev.scaled and ev.scaler is not None:
                return ev.scaler
        return None
