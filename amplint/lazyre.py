"""``lazy(pattern, flags)``: a module-level regex compiled on its first use.

Compiling the check path's ~50 patterns costs about 10 ms (more than the interpreter's own
start-up), and a run over one file uses a dozen of them. The object stands for the compiled
pattern: its first attribute access compiles it and copies the pattern's methods onto the
object, so later calls (``PAT.search(text)``) are plain attribute lookups of the compiled
pattern's bound methods, as fast as the pattern itself. Pass it only where a pattern's methods
are called, not to the ``re`` functions (``re.search(PAT, s)`` wants a real pattern)."""

from __future__ import annotations

import re

_COPIED = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
           "pattern", "flags", "groups", "groupindex")


class lazy:
    def __init__(self, pattern, flags: int = 0):
        self._args = (pattern, flags)
        self.pattern = pattern  # read without compiling (amplint.tokens reads literal patterns)

    def __getattr__(self, name: str):
        compiled = re.compile(*self._args)
        for attr in _COPIED:
            self.__dict__[attr] = getattr(compiled, attr)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r})"


class ascii_fast:
    """A case-insensitive pattern whose answer for ASCII text comes from plain string tests
    (``test(text.lower())``, exact there: ASCII has no case subtleties), so the regex is
    compiled only for text with other characters (the Unicode case rules of ``re.IGNORECASE``:
    ``ſ`` matches ``s``, ``K`` (Kelvin) ``k``, ...). ``search`` returns something truthy or None,
    for tests only (not a match object on the ASCII path); tests/test_lazyre.py compares each
    with its regex."""

    def __init__(self, pattern: str, test):
        self.pattern = pattern
        self._test = test
        self._rx = lazy(pattern, re.IGNORECASE)

    def search(self, text: str):
        if text.isascii():
            return True if self._test(text.lower()) else None
        return self._rx.search(text)

    def __repr__(self) -> str:
        return f"ascii_fast({self.pattern!r})"


def any_word(pattern: str):
    """The test of an alternation of plain words (``a|b_c|d``): does one occur?"""
    words = tuple(pattern.split("|"))
    return lambda low: any(w in low for w in words)
