"""Small helpers shared by rules (text of receivers, statement anchors)."""

from __future__ import annotations

import ast

from amplint.model import Event, FileModel


def receiver_text(model: FileModel, call: ast.Call) -> str:
    assert isinstance(call.func, ast.Attribute)
    return model.text(call.func.value)


def stmt_anchor(model: FileModel, stmt: ast.stmt) -> tuple[int, int]:
    row, col, _, _ = model.span(stmt)
    return (row, col)


def is_simple_call_stmt(e: Event) -> bool:
    """The event's call is the whole statement (``scaler.step(opt)`` on its own line)."""
    s = e.stmt
    return isinstance(s, ast.Expr) and s.value is e.node


def simple_stmt(e: Event) -> bool:
    return isinstance(e.stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return))


def scaler_text(model: FileModel, func, key) -> str:
    """How ``func`` spells the scaler ``key`` (``scaler``, ``self.scaler``)."""
    for e in func.events:
        if e.scaler == key and e.kind in ("scale", "step", "update", "unscale", "scaler_state") and isinstance(e.node, ast.Call):
            if isinstance(e.node.func, ast.Attribute):
                return model.text(e.node.func.value)
    return str(key[-1])


def scaler_disabled(model: FileModel, key) -> bool:
    """Every construction of the scaler passes ``enabled=False`` (a no-op scaler)."""
    ctors = model.constructions(key)
    if not ctors:
        return False
    for a in ctors:
        call = a.value
        if isinstance(call, ast.IfExp) and _constant_false(model, call.test, a.func):
            continue  # `GradScaler() if amp else None` with `amp = False` written in the code
        if not isinstance(call, ast.Call):
            return False
        off = any(
            kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and kw.value.value is False
            for kw in call.keywords
        )
        if not off:
            return False
    return True


def _constant_false(model: FileModel, test, func) -> bool:
    """``test`` is a name every assignment of which is the literal ``False`` (``amp = False``)."""
    if not isinstance(test, ast.Name) or func is None:
        return False
    assigns = model.assigns.get(model.key_of_expr(test, func), ())
    return bool(assigns) and all(isinstance(x.value, ast.Constant) and x.value.value is False for x in assigns)


def same_iteration(model: FileModel, early, late) -> bool:
    """``late`` runs later in the same training iteration as ``early`` (the iteration loop of
    ``late`` encloses ``early``; or neither is in a loop)."""
    loop = model.iteration_loop(late)
    if loop is None:
        return True  # a step function: the function body is the iteration
    return loop in early.loops


def plain_expr(node: ast.AST) -> bool:
    """An expression the fixer can replace in place (no surrounding parentheses to lose)."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))


def alone_on_line(model: FileModel, stmt: ast.stmt) -> bool:
    """``stmt`` fills its lines: nothing but indentation before it and at most a comment after
    it (not ``a; b``, not the body of a one-line ``if c: a``). Only such a statement can be
    replaced by a compound statement."""
    row, col, erow, ecol = model.span(stmt)
    lines = model.lines
    if erow > len(lines):
        return False
    before = lines[row - 1][:col]
    after = lines[erow - 1][ecol:].strip()
    return not before.strip() and (not after or after.startswith("#"))


def branch_guard(model: FileModel, func, lits) -> str | None:
    """The test that selects one ``if`` arm, as source text: ``lits`` must be a single branch
    literal of an ``if`` (not try/except, not an elif chain). None otherwise."""
    lits = [lit for lit in lits]
    if len(lits) != 1 or lits[0].key is None:
        return None
    lit = lits[0]
    node = next((n for n in ast.walk(func.node) if id(n) == lit.group and isinstance(n, ast.If)), None)
    if node is None:
        return None
    test = model.text(node.test)
    if "\n" in test:
        return None
    return test if lit.arm == 0 else f"not ({test})"
