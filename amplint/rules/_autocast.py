"""What device and dtype an autocast call selects (shared by AMP201/AMP203)."""

from __future__ import annotations

import ast

from amplint.model.names import qualify

FP16 = {"torch.float16", "torch.half"}
BF16 = {"torch.bfloat16"}


def autocast_device(call: ast.Call, q: str | None) -> str | None:
    if q and q.startswith("torch.cuda.amp"):
        return "cuda"
    if q and q.startswith("torch.cpu.amp"):
        return "cpu"
    dev = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device_type"), None)
    if isinstance(dev, ast.Constant) and isinstance(dev.value, str):
        return dev.value
    return None


def autocast_dtype(model, call: ast.Call, q: str | None, device: str | None) -> str | None:
    """'float16' / 'bfloat16' / None (unknown)."""
    kw = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    if kw is None and q and not q.startswith(("torch.cuda.amp", "torch.cpu.amp")) and len(call.args) >= 2:
        kw = call.args[1]
    if kw is None:
        if any(k.arg is None for k in call.keywords):
            return None
        return {"cuda": "float16", "cpu": "bfloat16"}.get(device or "")
    text = model.text(kw)
    if text in FP16:
        return "float16"
    if text in BF16:
        return "bfloat16"
    return None


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
