"""``# noqa`` suppression comments, flake8/ruff style, and the file-level
``# amplint: noqa`` (as ruff's ``# ruff: noqa``)."""

from __future__ import annotations

import re

from amplint.lazyre import lazy

_CODES = r"(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)"
NOQA = lazy(r"#\s*noqa(?P<sep>\s*:\s*" + _CODES + r")?", re.IGNORECASE)
# `# amplint: noqa` anywhere in a file exempts the whole file; `# amplint: noqa: AMP101`
# exempts it from the codes listed
FILE_NOQA = lazy(r"#\s*amplint\s*:\s*noqa(?P<sep>\s*:\s*" + _CODES + r")?", re.IGNORECASE)


def _codes(m: re.Match) -> set[str]:
    if not m.group("codes"):
        return set()
    return {c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c}


def noqa_codes(line: str) -> set[str] | None:
    """None: no noqa. Empty set: a blanket ``# noqa``. Else the listed codes."""
    if "#" not in line:
        return None
    m = NOQA.search(line)
    if m is None:
        return None
    return _codes(m)


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


class FileDirectives:
    """What a file's comments say about the whole file: the file-level exemption and the
    codes named in any noqa comment (to warn about the unknown ones)."""

    def __init__(self, lines: list[str]):
        self.exempt: set[str] | None = None  # None: none; empty: every code; else those codes
        self.named: list[tuple[int, str]] = []  # (row, code) of every code in a noqa comment
        for row, line in enumerate(lines, 1):
            if "#" not in line or "noqa" not in line.lower():
                continue
            for rx, file_level in ((FILE_NOQA, True), (NOQA, False)):
                for m in rx.finditer(line):
                    codes = _codes(m)
                    self.named += [(row, c) for c in sorted(codes)]
                    if file_level:
                        if not codes:
                            self.exempt = set()
                        elif self.exempt is None:
                            self.exempt = codes
                        elif self.exempt:
                            self.exempt |= codes

    def exempts(self, code: str) -> bool:
        return self.exempt is not None and (not self.exempt or code in self.exempt)

    def unknown(self, known, prefix: str = "AMP") -> list[tuple[int, str]]:
        """(row, code) of each code with amplint's prefix that is no amplint code (other
        tools' codes, `# noqa: E501, AMP001`, are not ours to judge)."""
        return [(row, c) for row, c in self.named if c.startswith(prefix) and c not in known]
