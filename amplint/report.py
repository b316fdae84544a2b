"""Output formats. Reporters see only messages, never rules or syntax trees."""

from __future__ import annotations

from collections import Counter

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

    def __repr__(self) -> str:
        return f"Message({self.path!r}, {self.code!r}, row={self.row}, col={self.col}, {self.message!r})"

    @property
    def fixable_marker(self) -> str:
        return " [*]" if self.applicable else ""


class Summary:
    def __init__(self, fixed: int = 0, remaining_fixable: int = 0, hidden_unsafe: int = 0, files: int = 0, fix_mode: bool = False):
        self.fixed = fixed
        self.remaining_fixable = remaining_fixable
        self.hidden_unsafe = hidden_unsafe
        self.files = files
        self.fix_mode = fix_mode


def _loc(m: Message) -> str:
    if m.cell is not None:
        return f"{m.path}:cell {m.cell}:{m.row}:{m.col + 1}:"
    return f"{m.path}:{m.row}:{m.col + 1}:"


def format_concise(messages: list[Message], summary: Summary, show_summary=True) -> str:
    lines = [f"{_loc(m)} {m.code}{m.fixable_marker} {m.message}" for m in messages]
    if show_summary:
        lines.extend(summary_lines(messages, summary))
    return "\n".join(lines) + ("\n" if lines else "")


def format_full(messages: list[Message], summary: Summary, show_summary=True) -> str:
    out: list[str] = []
    for m in messages:
        out.append(f"{_loc(m)} {m.code}{m.fixable_marker} {m.message}")
        if m.source_line is not None:
            src = m.source_line.rstrip("\r\n").expandtabs(4) if "\t" not in m.source_line else m.source_line.rstrip("\r\n")
            width = len(str(m.row))
            pad = " " * width
            end = m.end_col if m.end_row == m.row else len(src)
            caret_len = max(1, end - m.col)
            out.append(f"{pad} |")
            out.append(f"{m.row} | {src}")
            out.append(f"{pad} | {' ' * m.col}{'^' * caret_len} {m.code}")
            out.append(f"{pad} |")
            if m.fix is not None:
                out.append(f"{pad} = help: {m.fix.message}")
            out.append("")
    if show_summary:
        out.extend(summary_lines(messages, summary))
    return "\n".join(out) + ("\n" if out else "")


def summary_lines(messages: list[Message], summary: Summary) -> list[str]:
    n = len(messages)
    lines = []
    if summary.fix_mode and summary.fixed:
        s = "" if summary.fixed == 1 else "es"
        if n:
            lines.append(f"Found {n + summary.fixed} error{'s' if n + summary.fixed != 1 else ''} ({summary.fixed} fixed, {n} remaining).")
        else:
            lines.append(f"Found {summary.fixed} error{'s' if summary.fixed != 1 else ''} ({summary.fixed} fixed, 0 remaining).")
    elif n:
        lines.append(f"Found {n} error{'s' if n != 1 else ''}.")
    else:
        lines.append("All checks passed!")
    if summary.remaining_fixable:
        lines.append(f"[*] {summary.remaining_fixable} fixable with `amplint fix` (or `--fix`).")
    if summary.hidden_unsafe:
        lines.append(
            f"No fixes available ({summary.hidden_unsafe} hidden fix{'es' if summary.hidden_unsafe != 1 else ''} can be enabled with the `--unsafe-fixes` option)."
            if not summary.remaining_fixable
            else f"{summary.hidden_unsafe} hidden fix{'es' if summary.hidden_unsafe != 1 else ''} can be enabled with the `--unsafe-fixes` option."
        )
    return lines


def to_json_obj(m: Message) -> dict:
    fix = None
    if m.fix is not None:
        fix = {
            "applicability": m.fix.applicability,
            "message": m.fix.message,
            "edits": m.edits if m.edits is not None else [],
        }
    return {
        "cell": m.cell,
        "code": m.code,
        "end_location": {"column": m.end_col + 1, "row": m.end_row},
        "filename": m.path,
        "fix": fix,
        "location": {"column": m.col + 1, "row": m.row},
        "message": m.message,
        "noqa_row": m.noqa_row if not m.is_error else None,
        "url": m.url,
    }


def format_json(messages: list[Message], summary: Summary) -> str:
    import json

    return json.dumps([to_json_obj(m) for m in messages], indent=2) + "\n"


def format_json_lines(messages: list[Message], summary: Summary) -> str:
    import json

    return "".join(json.dumps(to_json_obj(m)) + "\n" for m in messages)


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def format_github(messages: list[Message], summary: Summary) -> str:
    out = []
    for m in messages:
        props = (
            f"title={_gh_escape('amplint (' + m.code + ')', True)},file={_gh_escape(m.path, True)},"
            f"line={m.row},col={m.col + 1},endLine={m.end_row},endColumn={m.end_col + 1}"
        )
        out.append(f"::error {props}::{_gh_escape(f'{_loc(m)} {m.code} {m.message}')}")
    return "\n".join(out) + ("\n" if out else "")


def format_statistics(messages: list[Message]) -> str:
    counts = Counter(m.code for m in messages)
    fixable = {m.code for m in messages if m.applicable}
    names = {m.code: m.name or "" for m in messages}
    width = max((len(str(c)) for c in counts.values()), default=1)
    lines = []
    for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        marker = "[*]" if code in fixable else "[ ]"
        lines.append(f"{count:>{width}}\t{code}\t{marker} {names[code]}")
    return "\n".join(lines) + ("\n" if lines else "")


FORMATTERS = {
    "full": format_full,
    "concise": format_concise,
    "json": format_json,
    "json-lines": format_json_lines,
    "github": format_github,
}
