"""Diagnostics, fixes and the fix actions the LibCST fixer knows how to apply.

A rule decides *where* and *what*; a fix is a tuple of position-anchored actions that
``amplint.fixer`` carries out on the LibCST tree, so every rewrite keeps comments,
quotes, indentation and line endings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Applicability = Literal["safe", "unsafe", "display-only"]

# Positions: rows are 1-based, columns 0-based characters (LibCST's and ast's convention
# after converting ast's byte offsets). Reports print columns 1-based, like ruff.
Pos = tuple[int, int]


@dataclass(frozen=True)
class InsertStatement:
    """Insert ``code`` (one or more statements) before/after the statement at ``anchor``,
    at the same indentation."""

    anchor: Pos
    code: str
    where: Literal["before", "after"] = "after"


@dataclass(frozen=True)
class ReplaceExpression:
    """Replace the expression spanning ``start``..``end`` with ``code``."""

    start: Pos
    end: Pos
    code: str


@dataclass(frozen=True)
class ReplaceStatement:
    """Replace the (simple or compound) statement at ``anchor`` with ``code``; an empty
    ``code`` deletes it."""

    anchor: Pos
    code: str


@dataclass(frozen=True)
class MoveOutOfWith:
    """Move the statement at ``first`` and every later statement of the same ``with``
    body (the with statement at ``with_anchor``) out of the block, right after it."""

    with_anchor: Pos
    first: Pos


Action = InsertStatement | ReplaceExpression | ReplaceStatement | MoveOutOfWith


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    row: int
    col: int  # 0-based character column
    end_row: int
    end_col: int
    fix: Fix | None = None
    stmt_row: int | None = None  # first line of the enclosing statement (for noqa)
    path: str = ""

    @property
    def sort_key(self):
        return (self.path, self.row, self.col, self.code)


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list["FileError"] = field(default_factory=list)


@dataclass(frozen=True)
class FileError:
    """A file that could not be checked: unreadable (E902), unparsable (E999), or a rule
    that crashed on it (AMP900, an internal error)."""

    code: str
    message: str
    row: int = 1
    col: int = 0
    internal: bool = False
