"""``github``: GitHub Actions workflow commands (inline annotations)."""

from __future__ import annotations

from amplint.report import Message, Summary, location


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
        command = "warning" if m.severity == "warning" else "error"
        out.append(f"::{command} {props}::{_gh_escape(f'{location(m)} {m.code} {m.message}')}")
    return "\n".join(out) + ("\n" if out else "")
