"""Abstract models by dtype: the places that make a module's weights fp16 (``.half()``,
``.to(torch.float16)``, a per-parameter loop, ``from_pretrained(torch_dtype=torch.float16)``),
with the name the module is spelled by, for the rule that a GradScaler cannot step fp16
weights (AMP202)."""

from __future__ import annotations

import ast

HALF_DTYPES = {"torch.float16", "torch.half", "torch.HalfTensor", "torch.cuda.HalfTensor"}
HALF_STRINGS = {"float16", "fp16", "half", "torch.float16"}
# calls that return the same module (the chain root is the model): model.cuda().half()
CHAIN = {"cuda", "cpu", "to", "train", "eval", "requires_grad_", "float", "half", "type", "xpu", "mps"}


def _is_half_value(model, v) -> bool:
    if isinstance(v, ast.Constant) and isinstance(v.value, str):
        return v.value in HALF_STRINGS
    return model.text(v) in HALF_DTYPES


def half_call(model, mc) -> bool:
    call = mc.node
    if mc.attr == "half":
        return not call.args and not call.keywords
    if mc.attr in ("to", "type"):
        vals = list(call.args) + [k.value for k in call.keywords if k.arg in ("dtype", "dst_type")]
        return any(model.text(v) in HALF_DTYPES for v in vals)
    return False


def _chain_root(node):
    """``model.cuda().to(dev)`` -> ``model``; a class construction or other call -> None."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CHAIN:
        node = node.func.value
    return node if isinstance(node, (ast.Name, ast.Attribute)) else None


def assign_target(stmt):
    """The single name or attribute a statement assigns (``x = ...``, ``x: T = ...``), else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Name, ast.Attribute)):
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, (ast.Name, ast.Attribute)) and stmt.value is not None:
        return stmt.target
    return None


class Cast:
    """One place that makes a module's weights fp16: ``r`` is how the module is spelled."""

    def __init__(self, r, node, stmt, func, ctx, seq):
        self.r, self.node, self.stmt, self.func, self.ctx, self.seq = r, node, stmt, func, ctx, seq


def casts(model):
    """Every place of this file that makes a module's weights fp16 (``model.half()``,
    ``model.to(torch.float16)``, ``Net().cuda().half()``, a loop casting each parameter,
    ``from_pretrained(..., torch_dtype=torch.float16)``), as ``Cast`` facts."""
    for f in model.funcs:
        for mc in f.methods:
            if not mc.called or mc.attr not in ("half", "to", "type") or not half_call(model, mc):
                continue
            root = _chain_root(mc.receiver_node)
            if root is not None:
                # parameters cast one by one: for p in model.parameters(): p.data = p.data.half()
                base = root.value if isinstance(root, ast.Attribute) and root.attr == "data" else root
                if isinstance(base, ast.Name):
                    loop = next((lp for lp in reversed(mc.ctx.loops) if base.id in lp.targets), None)
                    if loop is not None:
                        it = getattr(loop.node, "iter", None)
                        if (
                            isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                            and it.func.attr in ("parameters", "named_parameters", "modules", "children")
                            and isinstance(mc.stmt, ast.Assign)
                        ):
                            yield Cast(model.text(it.func.value), mc.node, mc.stmt, f, mc.ctx, mc.seq)
                        continue
                yield Cast(model.text(root), mc.node, mc.stmt, f, mc.ctx, mc.seq)
                continue
            # Net().half(), Net(cfg).cuda().half(): the assigned name is the model
            target = assign_target(mc.stmt)
            if target is not None and mc.stmt.value is mc.node:
                yield Cast(model.text(target), mc.node, mc.stmt, f, mc.ctx, mc.seq)
        for c in f.calls:
            if not (isinstance(c.callee, ast.Attribute) and c.callee.attr == "from_pretrained"):
                continue
            if not any(kw.arg in ("torch_dtype", "dtype") and _is_half_value(model, kw.value) for kw in c.node.keywords):
                continue
            target = assign_target(c.stmt)
            if target is not None:
                yield Cast(model.text(target), c.node, c.stmt, f, c.ctx, c.seq)
