"""Loop facts the protocol rules ask about: what a loop's body stores, whether an event runs
on every iteration of its loop once it runs on one, and whether an ``if`` test is a
gradient-accumulation boundary (``(i + 1) % accum == 0``, ``if is_accumulation_boundary``),
and whether a step in an inner loop is updated later in the outer iteration."""

from __future__ import annotations

import ast

from amplint.lazyre import lazy
from amplint.model.names import dotted

_BOUNDARY_NAME = lazy(r"(?i)accum|boundary|sync_grad|should_(?:step|update|sync)")


def encloses(node: ast.AST, inner: ast.AST) -> bool:
    """Does ``node``'s line range hold ``inner``'s first line?"""
    return node.lineno <= inner.lineno <= (node.end_lineno or node.lineno)


def boundary_test(test: ast.expr) -> bool:
    """An accumulation boundary test: ``(i + 1) % accum == 0``, ``if is_accumulation_boundary``."""
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)):
        return True
    names = [".".join(d) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))]
    return any(_BOUNDARY_NAME.search(x) for x in names) and not any(isinstance(n, ast.Compare) for n in ast.walk(test))


def runs_every_iteration(e, tests: dict, loop) -> bool:
    """Every ``if`` around the event ``e`` inside ``loop`` tests something the loop never
    changes (a config flag), so ``e`` runs on every iteration once it runs on one. ``tests``
    maps ``id(if node)`` to its test."""
    inside = {id(n) for n in ast.walk(loop.node) if isinstance(n, ast.If)}
    stored = None
    for lit in e.ctx.lits:
        if lit.group not in inside:
            continue
        test = tests.get(lit.group)
        if test is None:
            return False
        if stored is None:
            stored = stored_in(loop)
        for n in ast.walk(test):
            if isinstance(n, (ast.Call, ast.BinOp, ast.Subscript)):
                return False
            if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n)) and (".".join(d) in stored or d[0] in stored):
                return False
    return True


def stored_in(loop) -> set[str]:
    """Names and dotted targets the loop assigns (its targets among them)."""
    out = set(loop.targets)
    for n in ast.walk(loop.node):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)) and (d := dotted(n)):
            out.add(".".join(d))
            if isinstance(n, ast.Name):
                out.add(n.id)
    return out


def updated_after_inner_loop(model, e, loop) -> bool:
    """Is the step event ``e`` in an inner ``loop`` that is not over data, with an ``update()``
    of its scaler later in the outer iteration (``for _ in range(d_steps): ...;
    scaler.step(opt_d)``, then ``scaler.update()``)? That raises only when the inner loop runs
    twice; an inner loop over a data loader does not count."""
    later = [u for u in e.func.events if u.kind == "update" and u.scaler == e.scaler and u.seq > e.seq and loop not in u.loops]
    if not later:
        return False
    it = getattr(loop.node, "iter", None)
    text = model.text(it).lower() if it is not None else ""
    return not any(w in text for w in ("loader", "data", "batch", "dataset", "train", "iter"))
