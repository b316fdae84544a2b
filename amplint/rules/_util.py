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
