"""The one adapter between the language server and amplint's engine.

Everything the server knows about analysis goes through :class:`Workspace`: settings come
from ``amplint.settings.resolve`` (the CLI's ``[tool.amplint]``/``--config`` resolution),
findings from ``amplint.analyze.analyze_text`` filtered by ``amplint.selection.Filter``
(selection, per-file-ignores, ``# noqa``), fixes from ``amplint.fix.apply`` (``edits_for``
for one fix, ``fix_text`` for "fix all", the same code `amplint fix` runs), noqa comments from
the CLI's ``--add-noqa`` code, notebooks from ``amplint.notebook`` and hover text from
``amplint.docs``. Nothing here speaks JSON-RPC: the pygls glue lives in amplint.server.server.

``diagnose``/``diagnose_notebook`` always analyse afresh (never from a cache keyed by the
document's own text): the server calls them for every open document whenever any document
changes, so analysis that depends on other files (a project index) is picked up here without
touching the server.
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Callable

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from amplint.diagnostics import Diagnostic, FileError, FileResult
from amplint.source import split_lines

SOURCE = "amplint"
FIX_ALL_KIND = "source.fixAll.amplint"

# Severity of each finding in the editor: the rule's own ``severity`` (amplint.rules.SEVERITIES,
# the one definition every output format reads; ``warnings-as-errors`` makes every warning an
# error). Tags mark deprecated APIs and unneeded code, which editors draw struck out or faded.
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
}
DEFAULT_TAGS = {
    "AMP101": ("deprecated",),  # torch.cuda.amp.* (FutureWarning since torch 2.4)
    "AMP104": ("deprecated",),  # apex.amp
    "AMP203": ("unnecessary",),  # a GradScaler a bfloat16 loop does not need
}
_TAGS = {"deprecated": types.DiagnosticTag.Deprecated, "unnecessary": types.DiagnosticTag.Unnecessary}


def severity_of(code: str, warnings_as_errors: bool = False) -> types.DiagnosticSeverity:
    from amplint.rules import severity_of as rule_severity

    return _SEVERITY[rule_severity(code, warnings_as_errors)]


def tags_of(code: str, rule=None) -> list[types.DiagnosticTag] | None:
    names = getattr(rule, "tags", None) or DEFAULT_TAGS.get(code, ())
    out = [_TAGS[n] for n in names if n in _TAGS]
    return out or None


class _Timeout(BaseException):  # not an Exception: the engine's per-rule containment must not catch it
    pass


def _on_alarm(signum, frame):
    raise _Timeout


def within(seconds: float | None, fn: Callable, *args):
    """``fn(*args)`` under a time budget (SIGALRM, POSIX main thread; the server analyses on
    its main thread). Raises _Timeout when the budget is spent."""
    if not seconds or seconds <= 0 or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return fn(*args)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)


@dataclass
class ServerOptions:
    """`amplint server` flags: the CLI's settings flags, applied on top of [tool.amplint]."""

    config_path: str | None = None
    isolated: bool = False
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    preview: bool | None = None
    target_torch_version: str | None = None
    per_file_timeout: float | None = None  # None: the CLI's default (30 s); 0: no limit

    def cli_options(self, path: str):
        from amplint.pipeline import Options

        return Options(
            paths=(path,), stdin_filename=path, config_path=self.config_path, isolated=self.isolated,
            select=self.select, extend_select=self.extend_select, ignore=self.ignore, preview=self.preview,
            target_torch_version=self.target_torch_version, cache_dir=None, force_exclude=None,
        )

    @property
    def timeout(self) -> float:
        from amplint.runner import DEFAULT_PER_FILE_TIMEOUT

        return DEFAULT_PER_FILE_TIMEOUT if self.per_file_timeout is None else self.per_file_timeout


@dataclass
class Resolved:
    settings: object  # amplint.settings.Settings
    filt: object  # amplint.selection.Filter
    error: str | None = None
    config_mtime: int | None = None
    excluder: object = None

    def fresh(self) -> bool:
        cfg = self.settings.config_path
        if cfg is None or self.error is not None:
            return True  # a new pyproject.toml is noticed through the file watcher / didSave
        try:
            return os.stat(cfg).st_mtime_ns == self.config_mtime
        except OSError:
            return False

    def excluded(self, path: str) -> bool:
        """`--force-exclude` (or force-exclude = true): an excluded file is not checked, as with
        `amplint check --force-exclude --stdin-filename PATH -`."""
        if not self.settings.force_exclude:
            return False
        if self.excluder is None:
            from amplint.discover import Excluder

            self.excluder = Excluder(self.settings)
        return self.excluder.excluded(path, False)


@dataclass
class Cell:
    uri: str
    text: str
    python: bool = True  # a code cell in Python (markup and other languages are skipped)


@dataclass
class Analysis:
    """One document's (or notebook's) analysis: the text the engine saw and what it found."""

    uri: str
    path: str
    text: str  # for a notebook: the virtual module of its code cells
    resolved: Resolved
    result: FileResult
    kept: list[Diagnostic] = field(default_factory=list)
    # notebooks only
    cells: list[Cell] | None = None
    notebook: object = None  # amplint.notebook.Notebook
    _lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    # ---------------------------------------------------------------- positions
    def locate(self, row: int) -> tuple[str, int, list[str]] | None:
        """(uri, 0-based line, that document's lines) of a 1-based row of ``text``."""
        if self.cells is None:
            return self.uri, row - 1, self.lines
        hit = self.notebook.position(row)
        if hit is None:
            return None
        cell_no, r = hit  # cell number among all cells (1-based), row in the cell
        cell = self.cells[cell_no - 1]
        return cell.uri, r - 1, _cell_lines(cell)

    def documents(self) -> list[str]:
        return [self.uri] if self.cells is None else [c.uri for c in self.cells if c.python]

    def rewrite(self, new_text: str) -> dict[str, list[tuple[int, int, str]]] | None:
        """Line edits (start line, end line, new text; 0-based, end exclusive) per document
        that turn ``text`` into ``new_text``; None when a notebook cannot take it."""
        if self.cells is None:
            return {self.uri: line_edits(self.text, new_text)}
        from amplint.notebook import NotebookError

        try:
            new_cells = self.notebook.split(new_text)
        except NotebookError:
            return None
        out = {}
        code = [c for c in self.cells if c.python]
        for cell, old, new in zip(code, self.notebook.cell_texts, new_cells):
            if old != new:
                out[cell.uri] = line_edits(old, new)
        return out


def _cell_lines(cell: Cell) -> list[str]:
    return split_lines(cell.text)


def line_edits(old: str, new: str) -> list[tuple[int, int, str]]:
    """Whole-line edits, the way ``amplint.fix.apply.edits_for`` reports a fix."""
    a, b = split_lines(old), split_lines(new)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append((i1, i2, "".join(b[j1:j2])))
    return out


class Workspace:
    """Settings, analysis, fixes and docs for the documents an editor has open."""

    def __init__(self, options: ServerOptions | None = None, log: Callable[[str, str], None] | None = None):
        self.options = options or ServerOptions()
        self.codec = PositionCodec()
        self.log = log or (lambda level, message: None)
        self.on_config_error: Callable[[str], None] = lambda message: None
        self._settings: dict[str, Resolved] = {}
        self._analyses: dict[str, Analysis] = {}  # document or notebook uri -> last analysis
        self._cell_owner: dict[str, str] = {}  # cell uri -> notebook uri
        self._shown_errors: set[str] = set()
        self._texts: dict[str, str] = {}  # path -> text of each open Python document (unsaved edits)
        self._project_files: dict[str, list[str]] = {}  # project root -> its .py files
        self._no_project_mode = False

    # ---------------------------------------------------------------- settings
    def settings_for(self, path: str) -> Resolved:
        key = os.path.dirname(os.path.abspath(path))
        hit = self._settings.get(key)
        if hit is not None and hit.fresh():
            return hit
        from amplint.selection import Filter, enabled_codes, validate_per_file_ignores
        from amplint.settings import ConfigError, Settings, resolve

        error = None
        try:
            settings = resolve(self.options.cli_options(path))
            enabled = enabled_codes(settings, settings.config_path or "--select/--ignore")
            validate_per_file_ignores(settings)
        except ConfigError as exc:
            error = f"amplint: configuration error: {exc}; using the default settings"
            settings = Settings(root=key)
            enabled = enabled_codes(settings)
            if error not in self._shown_errors:
                self._shown_errors.add(error)
                self.log("error", error)
                self.on_config_error(error)
        mtime = None
        if settings.config_path is not None:
            try:
                mtime = os.stat(settings.config_path).st_mtime_ns
            except OSError:
                pass
        hit = Resolved(settings, Filter(settings, enabled), error, mtime)
        self._settings[key] = hit
        return hit

    def reload_settings(self) -> None:
        """A pyproject.toml changed (or appeared): resolve every file's settings again."""
        self._settings.clear()
        self._shown_errors.clear()
        self._project_files.clear()

    # ---------------------------------------------------------------- project mode
    def project_index(self, path: str, resolved: Resolved):
        """The project index (project mode, amplint.model.index) for ``path``, with the open
        documents' texts in place of the files on disk, so an unsaved change to a helper module
        counts; None where the engine has no project mode (file-local analysis)."""
        if self._no_project_mode:
            return None
        try:
            from amplint.discover import discover, project_root
            from amplint.model.index import ProjectIndex
        except ImportError:
            self._no_project_mode = True
            return None
        settings = resolved.settings
        root = project_root(settings, [path])
        files = self._project_files.get(root)
        if files is None:
            files = self._project_files[root] = discover([root], settings, suffixes=(".py",)).files
        have = {os.path.abspath(f) for f in files}
        extra = [p for p in self._texts if os.path.abspath(p) not in have]
        roots = [os.path.normpath(os.path.join(root, s)) for s in getattr(settings, "src", None) or (".",)]
        return ProjectIndex(roots, [*files, *extra], None, texts=dict(self._texts))

    # ---------------------------------------------------------------- analysis
    def _analyse(self, uri: str, path: str, text: str, cells=None, notebook=None) -> Analysis:
        from amplint import analyze

        resolved = self.settings_for(path)
        if resolved.excluded(path):
            return Analysis(uri, path, text, resolved, FileResult(path), [], cells, notebook)
        analyze.configure(resolved.settings.target_torch_version)
        analyze.load_rules()  # the rule modules load outside the per-file budget
        timeout = self.options.timeout
        try:
            if cells is None:
                self._texts[path] = text
            index = None
            try:
                index = self.project_index(path, resolved)
            except Exception as exc:  # the file alone is still checked
                self.log("error", f"{path}: project index: {type(exc).__name__}: {exc}")
            if index is None:
                result = within(timeout, analyze.analyze_text, text, path)
            else:
                result = within(timeout, lambda: analyze.analyze_text(text, path, index=index))
        except _Timeout:
            message = f"timeout: analysis took longer than {timeout:g} s (see --per-file-timeout)"
            self.log("warning", f"{path}: AMP901 {message}")
            result = FileResult(path, errors=[FileError("AMP901", message)])
        except Exception as exc:  # never take the editor session down
            message = f"internal error: {type(exc).__name__}: {exc}"
            self.log("error", f"{path}: AMP900 {message}")
            result = FileResult(path, errors=[FileError("AMP900", message, internal=True)])
        for e in result.errors:
            if e.internal:
                self.log("error", f"{path}:{e.row}:{e.col + 1}: {e.code} {e.message}")
        lines = split_lines(text)
        kept = [d for d in result.diagnostics if resolved.filt.keep(path, d, lines)]
        a = Analysis(uri, path, text, resolved, result, kept, cells, notebook, lines)
        self._analyses[uri] = a
        return a

    def diagnose(self, uri: str, text: str) -> list[types.Diagnostic]:
        """The diagnostics of one Python document (analysed afresh)."""
        a = self._analyse(uri, path_of(uri), text)
        return self.lsp_diagnostics(a).get(uri, [])

    def diagnose_notebook(self, uri: str, cells: list[Cell]) -> dict[str, list[types.Diagnostic]]:
        """The diagnostics of every cell of a notebook (its code cells analysed as one module,
        as `amplint check` does with an .ipynb file)."""
        from amplint.notebook import NotebookError, load_notebook

        path = path_of(uri)
        raw = json.dumps({
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5,
            "cells": [{"cell_type": "code" if c.python else "markdown", "metadata": {}, "source": c.text} for c in cells],
        })
        for c in cells:
            self._cell_owner[c.uri] = uri
        try:
            nb = load_notebook(raw, path)
        except NotebookError as exc:  # pragma: no cover - the JSON is ours
            self.log("error", f"{path}: {exc}")
            return {c.uri: [] for c in cells}
        a = self._analyse(uri, path, nb.virtual, cells, nb)
        out = {c.uri: [] for c in cells}
        out.update(self.lsp_diagnostics(a))
        return out

    def forget(self, uri: str) -> None:
        a = self._analyses.pop(uri, None)
        if a is not None and a.cells is None:
            self._texts.pop(a.path, None)
        if a is not None and a.cells is not None:
            for c in a.cells:
                self._cell_owner.pop(c.uri, None)

    def analysis_of(self, uri: str, text: str | None = None) -> Analysis | None:
        """The last analysis of a document (or of the notebook holding a cell), re-run when the
        document's text is no longer the one analysed."""
        owner = self._cell_owner.get(uri)
        if owner is not None:
            return self._analyses.get(owner)
        a = self._analyses.get(uri)
        if text is not None and (a is None or a.text != text):
            a = self._analyse(uri, path_of(uri), text)
        return a

    # ---------------------------------------------------------------- conversion
    def _pos(self, lines: list[str], line: int, char: int) -> types.Position:
        if line >= len(lines):
            if not lines:
                return types.Position(0, 0)
            last = lines[-1]
            if last.endswith(("\n", "\r")):
                return types.Position(len(lines), 0)
            return types.Position(len(lines) - 1, self.codec.client_num_units(last))
        return self.codec.position_to_client_units(lines, types.Position(max(line, 0), max(char, 0)))

    def _range(self, a: Analysis, row: int, col: int, end_row: int, end_col: int):
        start = a.locate(row)
        if start is None:
            return None
        uri, line, lines = start
        end = a.locate(end_row) if end_row != row else (uri, line + end_row - row, lines)
        if end is None or end[0] != uri:  # a span across cells: up to the end of its first line
            eline, ecol = line, len(lines[line].rstrip("\r\n")) if line < len(lines) else 0
        else:
            eline, ecol = end[1], end_col
        return uri, types.Range(self._pos(lines, line, col), self._pos(lines, eline, ecol))

    def lsp_diagnostic(self, a: Analysis, d: Diagnostic):
        from amplint.rules import ALL_RULES

        rule = ALL_RULES.get(d.code)
        where = self._range(a, d.row, d.col, d.end_row, d.end_col)
        if where is None:
            return None
        uri, rng = where
        return uri, types.Diagnostic(
            range=rng, message=d.message, severity=severity_of(d.code, a.resolved.settings.warnings_as_errors), code=d.code,
            code_description=types.CodeDescription(href=rule.url) if rule else None,
            source=SOURCE, tags=tags_of(d.code, rule),
            data={"fix": d.fix.applicability if d.fix is not None else None},
        )

    def _error_diagnostic(self, a: Analysis, e: FileError):
        start = a.locate(e.row) if e.code == "E999" else a.locate(1)
        if start is None:
            start = (a.documents()[0] if a.documents() else a.uri, 0, [])
        uri, line, lines = start
        col = e.col if e.code == "E999" else 0
        text = lines[line].rstrip("\r\n") if line < len(lines) else ""
        end = len(text) if col < len(text) else col
        rng = types.Range(self._pos(lines, line, col), self._pos(lines, line, end))
        return uri, types.Diagnostic(range=rng, message=e.message, severity=severity_of(e.code, a.resolved.settings.warnings_as_errors), code=e.code, source=SOURCE)

    def lsp_diagnostics(self, a: Analysis) -> dict[str, list[types.Diagnostic]]:
        out: dict[str, list[types.Diagnostic]] = {}
        for e in a.result.errors:
            uri, diag = self._error_diagnostic(a, e)
            out.setdefault(uri, []).append(diag)
        for d in a.kept:
            hit = self.lsp_diagnostic(a, d)
            if hit is not None:
                out.setdefault(hit[0], []).append(hit[1])
        return out

    def _workspace_edit(self, a: Analysis, per_doc: dict[str, list[tuple[int, int, str]]]) -> types.WorkspaceEdit:
        changes = {}
        for uri, edits in per_doc.items():
            lines = self._lines_of(a, uri)
            changes[uri] = [
                types.TextEdit(types.Range(self._pos(lines, i1, 0), self._pos(lines, i2, 0)), content)
                for i1, i2, content in edits
            ]
        return types.WorkspaceEdit(changes=changes)

    @staticmethod
    def _lines_of(a: Analysis, uri: str) -> list[str]:
        if a.cells is None:
            return a.lines
        cell = next(c for c in a.cells if c.uri == uri)
        return _cell_lines(cell)

    # ---------------------------------------------------------------- requests
    def _in_range(self, a: Analysis, uri: str, d: Diagnostic, rng: types.Range, lines: bool = False) -> types.Diagnostic | None:
        """The finding's diagnostic if it overlaps ``rng`` (``lines``: any line of it, the way
        editors ask for the code actions of the cursor's line)."""
        hit = self.lsp_diagnostic(a, d)
        if hit is None or hit[0] != uri:
            return None
        r = hit[1].range
        if lines:
            return hit[1] if r.start.line <= rng.end.line and rng.start.line <= r.end.line else None
        if (r.end.line, r.end.character) < (rng.start.line, rng.start.character):
            return None
        if (r.start.line, r.start.character) > (rng.end.line, rng.end.character):
            return None
        return hit[1]

    def code_actions(self, uri: str, text: str | None, rng: types.Range, only: list[str] | None = None) -> list[types.CodeAction]:
        from amplint.pipeline import applicable

        a = self.analysis_of(uri, text)
        if a is None:
            return []

        def wanted(kind: str) -> bool:
            return not only or any(kind == o or kind.startswith(o + ".") for o in only)

        actions: list[types.CodeAction] = []
        quick = wanted(types.CodeActionKind.QuickFix)
        for d in a.kept if quick else ():
            diag = self._in_range(a, uri, d, rng, lines=True)
            if diag is None:
                continue
            if d.fix is not None and d.fix.applicability in ("safe", "unsafe"):
                edit = self._fix_edit(a, d)
                if edit is not None:
                    unsafe = d.fix.applicability == "unsafe"
                    actions.append(types.CodeAction(
                        title=f"{d.fix.message} ({d.code}){' (unsafe)' if unsafe else ''}",
                        kind=types.CodeActionKind.QuickFix, diagnostics=[diag], edit=edit,
                        is_preferred=not unsafe,
                    ))
            edit = self._noqa_edit(a, d)
            if edit is not None:
                actions.append(types.CodeAction(
                    title=f"Add `# noqa: {d.code}`", kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag], edit=edit,
                ))
        if wanted(FIX_ALL_KIND) and any(applicable(d, False) for d in a.kept):
            edit = self._fix_all_edit(a)
            if edit is not None:
                actions.append(types.CodeAction(title="amplint: fix all safe fixes", kind=FIX_ALL_KIND, edit=edit))
        return actions

    def _edit_from_text(self, a: Analysis, new_text: str | None) -> types.WorkspaceEdit | None:
        if new_text is None or new_text == a.text:
            return None
        per_doc = a.rewrite(new_text)
        if not per_doc:
            return None
        return self._workspace_edit(a, per_doc)

    def _guarded(self, what: str, a: Analysis, fn: Callable, *args):
        try:
            return within(self.options.timeout, fn, *args)
        except _Timeout:
            self.log("warning", f"{a.path}: {what}: timed out")
        except Exception as exc:  # a fixer failure costs one action, never the session
            self.log("error", f"{a.path}: {what}: {type(exc).__name__}: {exc}")
        return None

    def _fix_edit(self, a: Analysis, d: Diagnostic) -> types.WorkspaceEdit | None:
        from amplint.fix.apply import edits_for

        edits = self._guarded(f"fix {d.code}", a, edits_for, a.text, d.fix)
        if not edits:
            return None
        if a.cells is None:  # edits_for's own edits, as `--output-format json` reports them
            per_doc = {a.uri: [(e["location"]["row"] - 1, e["end_location"]["row"] - 1, e["content"]) for e in edits]}
            return self._workspace_edit(a, per_doc)
        lines = list(a.lines)
        for e in sorted(edits, key=lambda e: e["location"]["row"], reverse=True):
            lines[e["location"]["row"] - 1 : e["end_location"]["row"] - 1] = [e["content"]]
        return self._edit_from_text(a, "".join(lines))

    def _noqa_edit(self, a: Analysis, d: Diagnostic) -> types.WorkspaceEdit | None:
        from amplint.fix.files import _add_noqa

        out = self._guarded("add noqa", a, _add_noqa, a.text, FileResult(a.path, [d]), a.resolved.filt)
        return self._edit_from_text(a, out[0] if out else None)

    def _fix_all_edit(self, a: Analysis) -> types.WorkspaceEdit | None:
        from amplint import analyze
        from amplint.fix.apply import fix_text
        from amplint.pipeline import applicable

        filt, path = a.resolved.filt, a.path
        analyze.configure(a.resolved.settings.target_torch_version)
        out = self._guarded("fix all", a, fix_text, a.text, path, lambda d, lines: filt.keep(path, d, lines) and applicable(d, False))
        return self._edit_from_text(a, out[0] if out else None)

    def hover(self, uri: str, text: str | None, position: types.Position) -> types.Hover | None:
        from amplint.docs import rule_markdown
        from amplint.rules import ALL_RULES

        a = self.analysis_of(uri, text)
        if a is None:
            return None
        point = types.Range(position, position)
        parts, ranges = [], []
        for d in a.kept:
            diag = self._in_range(a, uri, d, point)
            if diag is None or d.code not in ALL_RULES:
                continue
            rule = ALL_RULES[d.code]
            parts.append(f"**{d.code}** {d.message}\n\n[{rule.name}]({rule.url})\n\n---\n\n{rule_markdown(rule)}")
            ranges.append(diag.range)
        if not parts:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)),
            range=ranges[0] if len(ranges) == 1 else None,
        )


def path_of(uri: str) -> str:
    """The file system path of a document (an unsaved buffer: a name in the current directory,
    so settings still come from the project)."""
    from pygls import uris

    path = uris.to_fs_path(uri) if uri.startswith("file:") else None
    if path:
        return path
    tail = uri.rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "untitled.py"
    return os.path.join(os.getcwd(), tail)
