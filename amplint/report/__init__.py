"""Reporting: the messages reporters see (never rules or syntax trees) and the registry of
output formats, one module each (loaded only when its format is asked for)."""

from __future__ import annotations

import os
import sys

from amplint.diagnostics import Fix


class Message:
    """One reported finding or per-file error, as the reporters see it."""

    def __init__(
        self,
        path: str,
        code: str,
        message: str,
        row: int,
        col: int,  # 0-based
        end_row: int,
        end_col: int,
        fix: Fix | None = None,
        url: str | None = None,
        name: str | None = None,
        source_line: str | None = None,
        noqa_row: int | None = None,
        is_error: bool = False,
        edits: list | None = None,
        applicable: bool = False,  # the fix would be applied with the current flags
        extra: dict | None = None,
        cell: int | None = None,  # notebooks: 1-based cell number; row/end_row count lines within the cell
        severity: str = "error",  # "error" or "warning" (amplint.rules.severity_of, after warnings-as-errors)
    ):
        self.path = path
        self.code = code
        self.message = message
        self.row = row
        self.col = col
        self.end_row = end_row
        self.end_col = end_col
        self.fix = fix
        self.url = url
        self.name = name
        self.source_line = source_line
        self.noqa_row = noqa_row
        self.is_error = is_error
        self.edits = edits
        self.applicable = applicable
        self.extra = {} if extra is None else extra
        self.cell = cell
        self.severity = severity

    def __repr__(self) -> str:
        return f"Message({self.path!r}, {self.code!r}, row={self.row}, col={self.col}, {self.message!r})"

    @property
    def severity_marker(self) -> str:
        """`` [warning]`` after the code of a warning; nothing for an error (the default)."""
        return " [warning]" if self.severity == "warning" else ""

    @property
    def fixable_marker(self) -> str:
        return " [*]" if self.applicable else ""


class Summary:
    def __init__(self, fixed: int = 0, remaining_fixable: int = 0, hidden_unsafe: int = 0, files: int = 0, fix_mode: bool = False,
                 warnings_as_errors: bool = False):
        self.fixed = fixed
        self.remaining_fixable = remaining_fixable
        self.hidden_unsafe = hidden_unsafe
        self.files = files
        self.fix_mode = fix_mode
        self.warnings_as_errors = warnings_as_errors  # every warning is reported as an error


def location(m: Message) -> str:
    """``path:row:col:`` (``path:cell N:row:col:`` in a notebook), 1-based columns."""
    if m.cell is not None:
        return f"{m.path}:cell {m.cell}:{m.row}:{m.col + 1}:"
    return f"{m.path}:{m.row}:{m.col + 1}:"


# format name -> (module, function); modules load on demand so the default path stays light
FORMATS = {
    "full": ("text", "format_full"),
    "concise": ("text", "format_concise"),
    "json": ("json", "format_json"),
    "json-lines": ("json", "format_json_lines"),
    "github": ("github", "format_github"),
    "sarif": ("sarif", "format_sarif"),
    "gitlab": ("gitlab", "format_gitlab"),
    "junit": ("junit", "format_junit"),
}


def formatter(fmt: str):
    """The formatter ``(messages, summary) -> str`` of output format ``fmt``."""
    mod, fn = FORMATS[fmt]
    return getattr(__import__(f"amplint.report.{mod}", fromlist=(fn,)), fn)


def display_path(path: str) -> str:
    """A path as findings show it (ruff's way): relative to the working directory, without
    ``./``; a path outside it stays absolute. The same whether the file was named or found
    by walking a directory, with or without the cache. ``-`` (stdin) stays ``-``."""
    if path == "-":
        return path
    from amplint.fspath import absolute as _absolute, cwd as _cwd

    absolute = _absolute(path)
    cwd = _cwd()
    if absolute == cwd:
        return "."
    prefix = cwd.rstrip(os.sep) + os.sep
    if absolute.startswith(prefix):  # abspath normalised it: the rest is the relative path
        return absolute[len(prefix):]
    return absolute


def echo(text: str = "", err: bool = False) -> None:
    """One line to stdout (or stderr), as click.echo, without importing click."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def emit(text: str, output_file: str | None) -> None:
    """Write the report to ``output_file`` or stdout; an unwritable file is a usage error
    (exit 2); a reader that left the pipe ends the run quietly."""
    if output_file:
        try:
            d = os.path.dirname(os.path.abspath(output_file))
            os.makedirs(d, exist_ok=True)
            with open(output_file, "w", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(text)
        except OSError as exc:  # a usage problem, not a crash: exit 2 with the reason
            print(f"error: cannot write the report to {output_file}: {exc.strerror or exc}", file=sys.stderr)
            sys.exit(2)
    else:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `amplint check | head`: the reader left; keep the exit code
            quiet_stdout()


def quiet_stdout() -> None:
    """The reader of stdout left (`amplint ... | head`): send the rest to /dev/null so
    neither this run nor the interpreter's last flush fails on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
