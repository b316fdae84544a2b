"""``# noqa`` suppression comments, flake8/ruff style."""

from __future__ import annotations

import re

NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)


def noqa_codes(line: str) -> set[str] | None:
    """None: no noqa. Empty set: a blanket ``# noqa``. Else the listed codes."""
    if "#" not in line:
        return None
    m = NOQA.search(line)
    if m is None:
        return None
    if not m.group("codes"):
        return set()
    return {c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c}


def is_suppressed(lines: list[str], code: str, rows: list[int | None]) -> bool:
    for row in rows:
        if row is None or row < 1 or row > len(lines):
            continue
        codes = noqa_codes(lines[row - 1])
        if codes is None:
            continue
        if not codes or code in codes:
            return True
    return False
