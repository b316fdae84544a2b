"""What device and dtype an autocast call selects (shared by AMP201/AMP203)."""

from __future__ import annotations

import ast
import os

from amplint.fspath import absolute
from amplint.model.names import autocast_device, qualify
from amplint.model.names import autocast_dtype as _dtype


def autocast_dtype(model, call: ast.Call, q: str | None, device: str | None) -> str | None:
    """'float16' / 'bfloat16' / None (unknown)."""
    return _dtype(call, q, device, model.text)


def autocast_enabled_off(call: ast.Call) -> bool:
    return any(k.arg == "enabled" and isinstance(k.value, ast.Constant) and k.value.value is False for k in call.keywords)


def enabled_flag(model, call: ast.Call, func) -> str | None:
    """The text of the expression an autocast call is enabled by (``enabled=args.amp``; the
    first positional argument of ``torch.cuda.amp.autocast(args.amp)``), when it is a name."""
    v = next((k.value for k in call.keywords if k.arg == "enabled"), None)
    if v is None and call.args:
        q = qualify(call.func, func.scopes()) or ""
        if q.startswith("torch.cuda.amp") or q.startswith("torch.cpu.amp"):
            v = call.args[0]  # autocast(enabled=True, dtype=...): enabled comes first
    if isinstance(v, (ast.Name, ast.Attribute)):
        return model.text(v)
    return None


def described(model, call, func):
    q = qualify(call.func, func.scopes())
    dev = autocast_device(call, q)
    return dev, autocast_dtype(model, call, q, dev)


def base_location(index, bpath: str, line: int) -> str:
    """``path:line`` of a base class's autocast call, relative to the project root (AMP002, AMP201)."""
    root = index.roots[0] if getattr(index, "roots", None) else os.path.dirname(absolute(bpath))
    return f"{os.path.relpath(bpath, root).replace(os.sep, '/')}:{line}"
