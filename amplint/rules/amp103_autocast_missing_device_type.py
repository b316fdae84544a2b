from __future__ import annotations

import ast
import re

from amplint.diagnostics import Fix, ReplaceExpression
from amplint.model.names import canonical, qualify
from amplint.rules import Invalid, Rule

GENERIC = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
DEVICES = ("cuda", "cpu", "xpu", "mps", "hpu", "xla", "mtia")


class AutocastMissingDeviceType(Rule):
    code = "AMP103"
    severity = "error"
    name = "autocast-missing-device-type"
    summary = "`torch.autocast()` without a device type (TypeError)"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for `torch.autocast(...)` / `torch.amp.autocast(...)` called without its required
`device_type` argument.

## Why is this bad?
It raises as soon as the line runs:
`TypeError: autocast.__init__() missing 1 required positional argument: 'device_type'`
(also for `torch.autocast(dtype=...)` and `torch.amp.autocast(enabled=True)`). The code was
usually written for `torch.cuda.amp.autocast()`, which takes no device (that one is
reported by AMP101).

Only torch's own autocast is checked: a project's wrapper named `autocast`,
`partial(torch.autocast, device_type=...)`, a positional device and `**kwargs` are left alone.

## Example
```python
with torch.autocast(dtype=torch.float16):
    loss = model(x)
```

Use instead:
```python
with torch.autocast("cuda", dtype=torch.float16):
    loss = model(x)
```

## Fix safety
The fix adds the device type inferred from the surrounding code: the device of a
`GradScaler("cpu")` in the file, or a `device_type` variable in scope; otherwise `"cuda"`.
It is unsafe: the inferred device may not be the one the code runs on.
"""
    valid = [
        """
import torch
with torch.autocast("cuda", dtype=torch.float16):
    pass
with torch.amp.autocast(device_type="cpu"):
    pass
with torch.autocast(device):
    pass
""",
        # a project's own wrapper
        """
from .utils import autocast
with autocast(enabled=True):
    pass
""",
        """
import functools, torch
ac = functools.partial(torch.autocast, device_type="cuda")
with ac(dtype=torch.bfloat16):
    pass
with torch.autocast(**kwargs):
    pass
""",
        # torch.cuda.amp.autocast takes no device (AMP101's business)
        """
import torch
with torch.cuda.amp.autocast(enabled=True):
    pass
""",
    ]
    invalid = [
        Invalid(
            """
import torch
with torch.autocast(dtype=torch.float16):
    pass
""",
            fixed="""
import torch
with torch.autocast("cuda", dtype=torch.float16):
    pass
""",
            unsafe=True,
        ),
        # device inferred from the scaler
        Invalid(
            """
from torch.amp import autocast, GradScaler
scaler = GradScaler("cpu")
with autocast():
    pass
""",
            fixed="""
from torch.amp import autocast, GradScaler
scaler = GradScaler("cpu")
with autocast("cpu"):
    pass
""",
            unsafe=True,
        ),
        # a device_type parameter in scope
        Invalid(
            """
import torch
def step(model, x, device_type):
    with torch.amp.autocast(enabled=True, dtype=torch.bfloat16):
        return model(x)
""",
            fixed="""
import torch
def step(model, x, device_type):
    with torch.amp.autocast(device_type, enabled=True, dtype=torch.bfloat16):
        return model(x)
""",
            unsafe=True,
        ),
    ]

    def check(self, model):
        for call, f, ctx, stmt in model.autocast_calls:
            if call.args or any(kw.arg in (None, "device_type") for kw in call.keywords):
                continue
            q = qualify(call.func, f.scopes())
            if q not in GENERIC or canonical(q) != "autocast":
                continue
            dev = self._device(model, f)
            func_text = model.text(call.func)
            text = model.text(call)
            fix = None
            if text.startswith(func_text):
                rest = text[len(func_text):]
                m = re.match(r"\(\s*", rest)
                if m:
                    inner = rest[m.end():]
                    code = f"{func_text}({dev})" if inner.startswith(")") else f"{func_text}({dev}, {inner}"
                    (r1, c1, r2, c2) = model.span(call)
                    help_text = (
                        f"Pass `{dev}` (in scope here) as the device type" if not dev.startswith('"')
                        else f"Pass the device type {dev}"
                    )
                    fix = Fix("unsafe", help_text, (ReplaceExpression((r1, c1), (r2, c2), code),))
            yield self.diagnostic(
                model,
                call,
                f"`{func_text}()` needs a device type (raises \"TypeError: autocast.__init__() missing 1 required "
                f"positional argument: 'device_type'\"); pass " + (f"`{dev}`" if not dev.startswith('"') else f"e.g. {dev}"),
                fix,
                stmt,
            )

    @staticmethod
    def _device(model, f) -> str:
        g = f
        while g is not None:
            if "device_type" in g.params or "device_type" in g.locals:
                return "device_type"
            g = g.parent
        found = set()
        for key, assigns in model.assigns.items():
            for a in assigns:
                if a.kind != "ctor" or not isinstance(a.value, ast.Call):
                    continue
                call = a.value
                dev = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
                if isinstance(dev, ast.Constant) and dev.value in DEVICES:
                    found.add(dev.value)
        if len(found) == 1:
            return f'"{found.pop()}"'
        return '"cuda"'
