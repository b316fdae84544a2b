"""Autocast contexts: what device and dtype an autocast call selects, the flag that enables
it, and which region is in effect at an event (a region enabled by a flag is off in the
branch where that flag is false; a float16-or-float32 region is off on its float32 arm)."""

from __future__ import annotations

import ast
import os

from amplint.fspath import absolute
from amplint.model.names import autocast_device, canonical, qualify
from amplint.model import amp_ish
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



def in_enabled_region(ctx) -> bool:
    """Is a statement with context ``ctx`` inside an autocast region that may be enabled, and
    not in an explicitly disabled inner one?"""
    acs = ctx.autocasts
    return bool(acs) and acs[-1].enabled != "no" and any(a.enabled != "no" for a in acs)

def region_at(model, e):
    """The innermost autocast region enabled where the event ``e`` runs, else None: outside
    every region, in an explicitly disabled inner one, or in regions that are off there."""
    regions = [a for a in e.ctx.autocasts if a.enabled != "no" and not _off_here(model, e, a)]
    if not regions or e.ctx.autocasts[-1].enabled == "no":
        return None
    return regions[-1]


def _off_here(model, e, a) -> bool:
    """The region is enabled by a flag (``autocast(enabled=args.amp)``) and the backward runs
    only where that flag is false (``if args.amp: scaler...backward() else: loss.backward()``)."""
    if a.call is None:
        return False
    if not e.scaled and _fp32_arm(a.call) and any(lit.key and lit.pol is False and amp_ish(lit.key) for lit in e.ctx.lits):
        # `autocast(dtype=torch.float16 if args.fp16 else torch.float32)` and a plain backward under
        # `if scaler is None:`: without AMP the region is float32, which CUDA autocast turns off
        return True
    if a.enabled != "maybe":
        return False
    flag = enabled_flag(model, a.call, e.func)
    return flag is not None and any(lit.key == flag and lit.pol is False for lit in e.ctx.lits)


def _fp32_arm(call: ast.Call) -> bool:
    """The region's dtype is chosen by a condition, one arm float32 (autocast off on CUDA)."""
    dt = next((k.value for k in call.keywords if k.arg == "dtype"), call.args[1] if len(call.args) >= 2 else None)
    if not isinstance(dt, ast.IfExp):
        return False
    return any(isinstance(x, ast.Attribute) and x.attr in ("float32", "float") for x in (dt.body, dt.orelse))


def inherited_regions(model):
    """Methods of this file's classes that a project base class in another module calls
    inside an autocast region (``with torch.cuda.amp.autocast(self.amp): self.step(data)`` in
    ``BaseTrainer.iterate()``; project mode): (method, base method, method name, the base's
    ``path:line``, the region's ``device:dtype`` or True)."""
    index = model.index
    if not hasattr(index, "inherited_autocast_calls"):
        return
    for qual, info in model.classes.items():
        for bpath, bmeth, name, line, kind in index.inherited_autocast_calls(model.path, qual):
            f = info.methods.get(name)
            if f is not None:
                yield f, bmeth, name, base_location(index, bpath, line), kind


def indirect_fp16_regions(model) -> list:
    """CUDA float16 regions entered through a project wrapper or a variable rather than an
    autocast call in place: (node, function, ctx, with statement, False) each."""
    return [*_wrapper_regions(model), *_variable_regions(model)]


def _wrapper_regions(model):
    """``with my_autocast():`` where the project wrapper enters a CUDA float16 autocast."""
    for a in model.autocast_regions:
        if a.call is None and a.dtype == "cuda:float16" and a.enabled == "yes":
            yield a.node, a.func, a.ctx, a.with_node, False


def _variable_regions(model):
    """``with ctx:`` / ``with amp():`` where the variable was assigned a CUDA float16
    ``torch.autocast(...)`` (``ctx = torch.autocast("cuda") if amp else nullcontext()``)
    or a ``functools.partial(torch.autocast, "cuda", dtype=torch.float16)``, every
    assignment of it alike. Accelerate's ``accelerator.autocast`` is not one (it follows
    the accelerator's own scaler)."""
    for a in model.autocast_regions:
        if a.enabled == "no" or a.func is None:
            continue
        e = a.node
        partial = False
        if a.call is not None:  # amp(): a call of a variable holding a partial of torch.autocast
            if a.call is not e or not isinstance(e, ast.Call) or not isinstance(e.func, ast.Name) or e.args or e.keywords:
                continue
            e, partial = e.func, True
        elif not isinstance(e, (ast.Name, ast.Attribute)):
            continue
        key = model.key_of_expr(e, a.func)
        assigns = model.assigns.get(key, ()) if key is not None else ()
        if not assigns or not all(_fp16_cuda_value(model, x.value, x.func, partial) for x in assigns):
            continue
        yield a.node, a.func, a.ctx, a.with_node, False


def _fp16_cuda_value(model, value, func, partial: bool) -> bool:
    """Is ``value`` a CUDA float16 ``torch.autocast(...)`` (one arm of ``x if c else
    nullcontext()`` may be the other context), or with ``partial`` a
    ``functools.partial(torch.autocast, "cuda", dtype=torch.float16)``, enabled?"""
    if value is None or func is None:
        return False
    if isinstance(value, ast.IfExp) and not partial:
        arms = [v for v in (value.body, value.orelse) if not _null_context(v, func)]
        return len(arms) == 1 and _fp16_cuda_value(model, arms[0], func, False)
    if not isinstance(value, ast.Call):
        return False
    call = value
    if partial:
        q = qualify(value.func, func.scopes()) or ""
        if q not in ("functools.partial", "partial") or not value.args or canonical(qualify(value.args[0], func.scopes())) != "autocast":
            return False
        call = ast.Call(func=value.args[0], args=value.args[1:], keywords=value.keywords)
    elif canonical(qualify(call.func, func.scopes())) != "autocast":
        return False  # accelerate's, or unknown
    if autocast_enabled_off(call):
        return False
    return described(model, call, func) == ("cuda", "float16")


def _null_context(v, func) -> bool:
    return isinstance(v, ast.Call) and (qualify(v.func, func.scopes()) or "").rsplit(".", 1)[-1] in ("nullcontext", "suppress")


def inherited_fp16_training(model) -> list:
    """Training steps run inside a CUDA float16 region that a project base class enters
    (``inherited_regions`` of kind ``cuda:float16``): (method, base method, the base's
    ``path:line``, the method's first backward event), for each method that enters no region of
    its own, runs ``backward()`` outside any autocast of its own and not only under an AMP-off
    test, and steps an optimizer after it."""
    seen, out = [], []
    for f, bmeth, _name, where, kind in inherited_regions(model):
        if kind != "cuda:float16" or any(f is g for g in seen):
            continue
        seen.append(f)
        if any(a.func is f for a in model.autocast_regions):
            continue  # the method enters a region of its own: that region's dtype decides
        backs = [e for e in f.events if e.kind == "backward" and not e.ctx.autocasts
                 and not any(lit.key and not lit.pol and amp_ish(lit.key) for lit in e.ctx.lits)]
        if backs and any(e.kind == "opt_step" and e.seq > b.seq for e in f.events for b in backs):
            out.append((f, bmeth, where, backs[0]))
    return out
