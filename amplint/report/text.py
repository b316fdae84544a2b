"""The human formats: ``full`` (with the source line and a caret), ``concise`` (one line a
finding), the run summary and ``--statistics``."""

from __future__ import annotations

from collections import Counter

from amplint.report import Message, Summary, location


def format_concise(messages: list[Message], summary: Summary, show_summary=True) -> str:
    lines = [f"{location(m)} {m.code}{m.severity_marker}{m.fixable_marker} {m.message}" for m in messages]
    if show_summary:
        lines.extend(summary_lines(messages, summary))
    return "\n".join(lines) + ("\n" if lines else "")


def format_full(messages: list[Message], summary: Summary, show_summary=True) -> str:
    out: list[str] = []
    for m in messages:
        out.append(f"{location(m)} {m.code}{m.severity_marker}{m.fixable_marker} {m.message}")
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
        if n:
            lines.append(f"Found {n + summary.fixed} error{'s' if n + summary.fixed != 1 else ''} ({summary.fixed} fixed, {n} remaining{_of_them(messages)}).")
        else:
            lines.append(f"Found {summary.fixed} error{'s' if summary.fixed != 1 else ''} ({summary.fixed} fixed, 0 remaining).")
    elif n:
        lines.append(f"Found {_counts(messages)}.")
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _counts(messages: list[Message]) -> str:
    """``3 errors`` (ruff's wording when every finding is an error), ``2 errors and 1
    warning``, ``1 warning``."""
    warnings = sum(m.severity == "warning" for m in messages)
    errors = len(messages) - warnings
    if not warnings:
        return _plural(errors, "error")
    if not errors:
        return _plural(warnings, "warning")
    return f"{_plural(errors, 'error')} and {_plural(warnings, 'warning')}"


def _of_them(messages: list[Message]) -> str:
    warnings = sum(m.severity == "warning" for m in messages)
    return f", {warnings} of them {'a warning' if warnings == 1 else 'warnings'}" if warnings else ""


STATISTICS_FORMATS = ("full", "concise", "json")


def format_statistics(messages: list[Message], summary: Summary | None = None, fmt: str = "full", show_summary: bool = True) -> str:
    """``--statistics``: one row per code, most frequent first; ruff's layout in every
    format it supports (full and concise: the tab-separated table and the summary; json: a
    list of ``{code, name, count, fixable, fixable_count}``)."""
    counts = Counter(m.code for m in messages)
    fixable = Counter(m.code for m in messages if m.applicable)
    names = {m.code: m.name or "" for m in messages}
    order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if fmt == "json":
        import json

        rows = [{"code": c, "name": names[c], "count": n, "fixable": fixable[c] > 0, "fixable_count": fixable[c]} for c, n in order]
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(c)) for c in counts.values()), default=1)
    lines = []
    for code, count in order:
        marker = "[*]" if fixable[code] else "[ ]"
        lines.append(f"{count:>{width}}\t{code}\t{marker} {names[code]}")
    if show_summary and summary is not None:
        lines.extend(summary_lines(messages, summary))
    return "\n".join(lines) + ("\n" if lines else "")
