"""``gitlab``: GitLab Code Quality, fingerprints stable when code above a finding moves."""

from __future__ import annotations

import hashlib
import json

from amplint.report import Message, Summary
from amplint.report.paths import relative


# Code Quality's scale is info, minor, major, critical, blocker: an error (training breaks or
# raises) is major, a warning (deprecated, or merely wasteful) is minor
GITLAB_SEVERITY = {"error": "major", "warning": "minor"}


def fingerprint(path: str, code: str, source_line: str | None, occurrence: int = 0) -> str:
    """Stable across line moves: the path, the rule and the text of the flagged line (stripped),
    not its row. ``occurrence`` tells apart identical lines in one file."""
    text = (source_line or "").strip()
    key = f"{relative(path)}\0{code}\0{text}\0{occurrence}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def format_gitlab(messages: list[Message], summary: Summary) -> str:
    out = []
    seen: dict[tuple[str, str, str], int] = {}
    for m in messages:
        key = (relative(m.path), m.code, (m.source_line or "").strip())
        n = seen.get(key, 0)
        seen[key] = n + 1
        out.append(
            {
                "check_name": m.code,
                "description": f"{m.code}: {m.message}",
                "categories": ["Bug Risk"],
                "severity": GITLAB_SEVERITY.get(m.severity, "major"),
                "fingerprint": fingerprint(m.path, m.code, m.source_line, n),
                "location": {
                    "path": relative(m.path),
                    "positions": {
                        "begin": {"line": m.row, "column": m.col + 1},
                        "end": {"line": m.end_row, "column": m.end_col + 1},
                    },
                },
            }
        )
    return json.dumps(out, indent=2) + "\n"
