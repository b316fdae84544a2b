"""Diagnostics, fixes and the fix actions the LibCST fixer knows how to apply.

A rule decides *where* and *what*; a fix is a tuple of position-anchored actions that
``amplint.fix.apply`` carries out on the LibCST tree, so every rewrite keeps comments,
quotes, indentation and line endings.
"""

from __future__ import annotations

from amplint.record import Record

Applicability = str  # "safe", "unsafe" or "display-only"

# Positions: rows are 1-based, columns 0-based characters (LibCST's and ast's convention
# after converting ast's byte offsets). Reports print columns 1-based, like ruff.
Pos = tuple[int, int]


class InsertStatement(Record):
    """Insert ``code`` (one or more statements) before/after the statement at ``anchor``,
    at the same indentation."""

    anchor: Pos
    code: str
    where: str = "after"  # "before" or "after"


class ReplaceExpression(Record):
    """Replace the expression spanning ``start``..``end`` with ``code``."""

    start: Pos
    end: Pos
    code: str


class ReplaceStatement(Record):
    """Replace the (simple or compound) statement at ``anchor`` with ``code``; an empty
    ``code`` deletes it."""

    anchor: Pos
    code: str


class MoveStatement(Record):
    """Move the statement at ``anchor`` (its comments and line breaks with it) after the
    statement at ``to``."""

    anchor: Pos
    to: Pos


class MoveOutOfWith(Record):
    """Move the statement at ``first`` and every later statement of the same ``with``
    body (the with statement at ``with_anchor``) out of the block, right after it."""

    with_anchor: Pos
    first: Pos


class RewriteCall(Record):
    """Rewrite the call spanning ``start``..``end`` in place: its callee becomes ``func``
    (unchanged when None) and ``prepend`` arguments go before the existing ones. Everything
    inside the parentheses (comments, line breaks, the other arguments) is kept."""

    start: Pos
    end: Pos
    func: str | None
    prepend: tuple[str, ...] = ()


class RenameImportModule(Record):
    """In the ``from M import ...`` statement at ``anchor``, replace the module ``M`` with
    ``module``; the imported names, parentheses and comments are kept."""

    anchor: Pos
    module: str


Action = InsertStatement | ReplaceExpression | ReplaceStatement | MoveOutOfWith | MoveStatement | RewriteCall | RenameImportModule


class Fix(Record):
    applicability: Applicability
    message: str
    actions: tuple[Action, ...]


class Diagnostic(Record):
    code: str
    message: str
    row: int
    col: int  # 0-based character column
    end_row: int
    end_col: int
    fix: Fix | None = None
    stmt_row: int | None = None  # first line of the enclosing statement (for noqa)
    path: str = ""
    why: tuple = ()  # ((row, text), ...): the facts of the core's analysis behind it, for `explain`

    @property
    def sort_key(self):
        return (self.path, self.row, self.col, self.code)


class FileResult:
    """Every rule's raw findings for one file, and the errors that kept it from being checked."""

    def __init__(self, path: str, diagnostics: list | None = None, errors: list | None = None, summary=None):
        self.path = path
        self.diagnostics: list[Diagnostic] = [] if diagnostics is None else diagnostics
        self.errors: list[FileError] = [] if errors is None else errors
        self.summary = summary  # amplint.model.summary.FileSummary (project mode), None if not parsed
        # the file may restore an optimizer state (amplint.screen.may_restore_optimizer on its bytes):
        # whether the project resumes training at all (AMP301); set for every file, parsed or not
        self.restores = True
        # the file may save or load a scaler's state (amplint.screen.may_hold_scaler_state): whether
        # a scaler handed to a class elsewhere can be checkpointed by other code (AMP301)
        self.scaler_state = True

    # The summary is pickled on its own (the cache, the process pool) and unpickled when first
    # read: a warm run that needs no project pass never imports the model to load it.
    @property
    def summary(self):
        blob = self.__dict__.get("_summary_blob")
        if blob is not None:
            import pickle

            self.__dict__["_summary"] = pickle.loads(blob)
            self.__dict__["_summary_blob"] = None
        return self.__dict__.get("_summary")

    @summary.setter
    def summary(self, value) -> None:
        self.__dict__["_summary"] = value
        self.__dict__["_summary_blob"] = None

    def __getstate__(self):
        state = dict(self.__dict__)
        if state.get("_summary") is not None:
            import pickle

            state["_summary_blob"] = pickle.dumps(state["_summary"], protocol=pickle.HIGHEST_PROTOCOL)
            state["_summary"] = None
        return state

    def __eq__(self, other) -> bool:
        return isinstance(other, FileResult) and (self.path, self.diagnostics, self.errors) == (other.path, other.diagnostics, other.errors)

    def __repr__(self) -> str:
        return f"FileResult({self.path!r}, diagnostics={self.diagnostics!r}, errors={self.errors!r})"


class FileError(Record):
    """A file that could not be checked: unreadable (E902), unparsable (E999), or a rule
    that crashed on it (AMP900, an internal error)."""

    code: str
    message: str
    row: int = 1
    col: int = 0
    internal: bool = False
