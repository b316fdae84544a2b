"""Import and alias resolution: which torch object does a name or attribute chain denote?

Everything here works on Python's ``ast`` (the fast path used for checking). A scope is a
plain dict ``local name -> qualified name``; function-local imports live in the function's
own scope and shadow the module's.
"""

from __future__ import annotations

import ast
import re

from amplint.lazyre import lazy

# torch.amp.GradScaler and its device-specific and sharded variants (torch's own and fairscale's).
SCALER_CTORS = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.cpu.amp.GradScaler",
        "torch.cpu.amp.grad_scaler.GradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
        # fairscale's subclasses of torch's GradScaler (same interface, same state_dict)
        "fairscale.optim.grad_scaler.ShardedGradScaler",
        "fairscale.optim.grad_scaler.GradScaler",
    }
)

AUTOCAST = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
        "torch.cpu.amp.autocast",
        "torch.cpu.amp.autocast_mode.autocast",
    }
)

CLIP_FUNCS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_value_",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grad.get_total_norm",
    }
)

PARTIAL = frozenset({"functools.partial"})

# Public API of torch.amp.GradScaler in torch 2.13 (see amp-facts.md section 1).
GRAD_SCALER_API = frozenset(
    {
        "get_backoff_factor",
        "get_growth_factor",
        "get_growth_interval",
        "get_scale",
        "is_enabled",
        "load_state_dict",
        "scale",
        "set_backoff_factor",
        "set_growth_factor",
        "set_growth_interval",
        "state_dict",
        "step",
        "unscale_",
        "update",
    }
)


def add_import(scope: dict[str, str], node: ast.Import | ast.ImportFrom) -> None:
    """Record the names bound by an import statement in ``scope``."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                scope[alias.asname] = alias.name
            else:
                # ``import torch.cuda.amp`` binds ``torch``.
                top = alias.name.split(".", 1)[0]
                scope[top] = top
    else:
        if node.level or not node.module:
            # Relative imports are the project's own code, never torch.
            for alias in node.names:
                if alias.name == "*":  # one entry per star import (a package re-exporting its modules)
                    scope["*" + "." * node.level + (node.module or "")] = "." * node.level + (node.module or "") + ".*"
                    continue
                scope[alias.asname or alias.name] = "." * node.level + (node.module or "") + "." + alias.name
            return
        for alias in node.names:
            if alias.name == "*":
                scope["*" + node.module] = node.module + ".*"
                continue
            scope[alias.asname or alias.name] = f"{node.module}.{alias.name}"


def dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; None when the chain does not start at a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        parts.reverse()
        return parts
    return None


def qualify(node: ast.AST, scopes: list[dict[str, str]]) -> str | None:
    """The fully qualified name of a Name/Attribute chain, resolved through ``scopes``
    (innermost first). Unresolved heads are returned as written (``torch`` used without
    an import still means torch)."""
    parts = dotted(node)
    if parts is None:
        return None
    return qualify_parts(parts, scopes)


def qualify_parts(parts: list[str], scopes: list[dict[str, str]]) -> str:
    """``qualify`` of a chain already split by ``dotted``."""
    head = parts[0]
    for scope in scopes:
        if head in scope:
            base = scope[head]
            break
    else:
        base = head
    if len(parts) == 1:
        return base
    return base + "." + ".".join(parts[1:])


_CANONICAL_TOKENS = frozenset({"GradScaler", "autocast", "clip"})


def canonical(qualname: str | None) -> str | None:
    """Fold the many spellings of torch's AMP objects onto one name."""
    if qualname is None:
        return None
    if qualname in _CANONICAL_TOKENS:
        # a bare name that no import binds (a project's own `class GradScaler`): not torch's
        return "?" + qualname
    if qualname in SCALER_CTORS:
        return "GradScaler"
    if qualname in AUTOCAST:
        return "autocast"
    if qualname in CLIP_FUNCS:
        return "clip"
    return qualname


def literal_dict(node: ast.AST | None) -> ast.Dict | None:
    """``{...}`` as is, or ``dict(k=v, ...)`` (keywords only) as the equivalent ``ast.Dict``
    (made once per call node, placed at the call, so its text and identity are stable)."""
    if isinstance(node, ast.Dict):
        return node
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict") or node.args:
        return None
    if any(kw.arg is None for kw in node.keywords):
        return None
    made = getattr(node, "_amplint_dict", None)
    if made is None:
        made = ast.Dict(keys=[ast.Constant(kw.arg) for kw in node.keywords], values=[kw.value for kw in node.keywords])
        ast.copy_location(made, node)
        node._amplint_dict = made
    return made


def state_owner(n) -> ast.expr | None:
    """What ``n`` takes the state of: ``x`` for ``x.state_dict()`` or for a helper call named
    for it with ``x`` as its one argument (``get_state_dict(optimizer)``, ``unwrap_state_dict(model)``)."""
    if not isinstance(n, ast.Call):
        return None
    if isinstance(n.func, ast.Attribute) and n.func.attr == "state_dict":
        return n.func.value
    name = n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(n.func, ast.Attribute) else ""
    if "state_dict" in name and len(n.args) == 1 and not n.keywords and isinstance(n.args[0], (ast.Name, ast.Attribute)):
        return n.args[0]
    return None



# Loss-scaler wrappers from libraries whose state is their GradScaler's (``state_dict()``).
WRAPPER_CLASSES = frozenset({"timm.utils.NativeScaler", "timm.utils.cuda.NativeScaler"})


def _self_assignments(cls_node: ast.ClassDef) -> dict[str, list]:
    """attr -> one ``(statement, method, whole)`` per assignment of ``self.<attr>`` in the
    methods of ``cls_node``; ``whole``: the attribute is the whole target (not an element of
    a tuple target, not augmented)."""
    made: dict[str, list] = {}
    for m in cls_node.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or not m.args.args:
            continue
        me = m.args.args[0].arg
        for n in _statements(m.body):
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
                targets = [n.target]
            else:
                continue
            for t in targets:
                for x in ([t] if isinstance(t, ast.Attribute) else ast.walk(t) if isinstance(t, (ast.Tuple, ast.List, ast.Starred)) else ()):
                    if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == me:
                        made.setdefault(x.attr, []).append((n, m, t is x and not isinstance(n, ast.AugAssign)))
    return made


def attr_classes(cls_node: ast.ClassDef, scope) -> dict[str, str]:
    """``self.<attr> = Name(...)``: the attributes the methods of ``cls_node`` assign exactly
    once, from a call of a name the module imports or defines (not a torch one), mapped to
    that qualified name: the class whose methods ``self.<attr>.m()`` runs
    (``self.ckpt = CheckpointManager(out)``)."""
    out = {}
    for attr, made in _self_assignments(cls_node).items():
        if len(made) == 1 and made[0][2] and isinstance(made[0][0].value, ast.Call):
            q = qualify(made[0][0].value.func, [scope])
            if q and not q.startswith("torch."):
                out[attr] = q
    return out


def declared_class(ann, scope) -> str | None:
    """The qualified name of the class a type annotation declares (``Saver``,
    ``utils.Saver``, ``"Saver"``, ``Optional[Saver]``, ``Saver | None``), else None. Only a
    declaration: the object may be of a subclass, which callers must rule out."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        sides = [x for x in (ann.left, ann.right) if not (isinstance(x, ast.Constant) and x.value is None)]
        if len(sides) != 1:
            return None
        ann = sides[0]
    if isinstance(ann, ast.Subscript) and (qualify(ann.value, [scope]) or "").rsplit(".", 1)[-1] == "Optional":
        ann = ann.slice
    if not isinstance(ann, (ast.Name, ast.Attribute)):
        return None
    q = qualify(ann, [scope])
    if not q or q.startswith(("torch.", "typing.", "collections.", "builtins.")) or q in _BUILTIN_TYPES:
        return None
    return q


_BUILTIN_TYPES = frozenset({"int", "float", "str", "bool", "bytes", "dict", "list", "tuple", "set", "object", "type", "Any"})


def declared_attr_classes(cls_node: ast.ClassDef, scope) -> dict[str, str]:
    """``self.<attr>: Saver = saver`` or ``self.<attr> = saver`` with a parameter
    ``saver: Saver``: the attributes the methods of ``cls_node`` assign exactly once, from a
    value whose class is only declared, mapped to that class's qualified name."""
    out = {}
    for attr, made in _self_assignments(cls_node).items():
        if len(made) != 1 or not made[0][2]:
            continue
        n, m, _whole = made[0]
        ann = None
        if isinstance(n, ast.AnnAssign) and n.value is not None and not isinstance(n.value, ast.Call):
            ann = n.annotation
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Name):
            ann = next((a.annotation for a in (*m.args.posonlyargs, *m.args.args, *m.args.kwonlyargs) if a.arg == n.value.id), None)
        if ann is not None and (q := declared_class(ann, scope)):
            out[attr] = q
    return out


# Names that say "a GradScaler" (``scaler``, ``grad_scaler``, ``self._amp_scaler``, ``fp16_scaler``).
SCALER_NAME = lazy(r"^_?(?:grad_?|amp_?|fp16_?|loss_?)?scaler$", re.IGNORECASE)


def _statements(body):
    """The statements of a block and of the blocks nested in it (not their expressions, not
    nested functions or classes): an assignment is always one of them."""
    todo = list(body)
    while todo:
        st = todo.pop()
        yield st
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(st, field, None)
            if isinstance(sub, list):
                todo.extend(x for x in sub if isinstance(x, ast.stmt))
        for h in getattr(st, "handlers", None) or ():
            todo.extend(h.body)
        for case in getattr(st, "cases", None) or ():
            todo.extend(case.body)


FP16 = {"torch.float16", "torch.half"}
BF16 = {"torch.bfloat16"}


def autocast_device(call: ast.Call, q: str | None) -> str | None:
    """The device an autocast call (``q``: its qualified name) selects, when literal."""
    if q and q.startswith("torch.cuda.amp"):
        return "cuda"
    if q and q.startswith("torch.cpu.amp"):
        return "cpu"
    dev = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device_type"), None)
    if isinstance(dev, ast.Constant) and isinstance(dev.value, str):
        return dev.value
    return None


def autocast_dtype(call: ast.Call, q: str | None, device: str | None, text=ast.unparse) -> str | None:
    """'float16' / 'bfloat16' / None (unknown) for an autocast call on ``device``; ``text``
    gives an expression's source (a model's, or ``ast.unparse``)."""
    kw = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    if kw is None and q and not q.startswith(("torch.cuda.amp", "torch.cpu.amp")) and len(call.args) >= 2:
        kw = call.args[1]
    if kw is None:
        if any(k.arg is None for k in call.keywords):
            return None
        return {"cuda": "float16", "cpu": "bfloat16"}.get(device or "")
    t = text(kw)
    if t in FP16:
        return "float16"
    if t in BF16:
        return "bfloat16"
    return None
