"""The AMP tokens: which rows of a file can hold AMP code (one literal search over the text).
Shared by the parser's masking and the model builder, which walk only what can matter."""

from __future__ import annotations

import re

from amplint.lazyre import lazy

# A function whose text matches none of these cannot produce an AMP event or reference.
RELEVANT = lazy(r"[sS]caler|autocast|\bamp\b|apex|custom_fwd|custom_bwd")
# In a file that has a scaler, half-precision models and checkpoints matter too.
RELEVANT_WITH_SCALER = lazy(
    r"[sS]caler|autocast|\bamp\b|apex|custom_fwd|custom_bwd|half\(|float16|state_dict"
)

# A function whose text holds none of these cannot do anything a project summary records
# (amplint.model.summary): scaler calls, backward, checkpoints, autocast wrappers.
SUMMARY_TOKENS = lazy(r"backward|save|[sS]caler|autocast|state_dict|clip_grad")


_last_rows: dict[re.Pattern, tuple[str, list[int]]] = {}  # pattern -> (the last text searched, its rows)


def match_rows(source: str, pattern: re.Pattern) -> list[int]:
    """The rows (counted at \\n) that hold a match of ``pattern``. The masking, the summary
    and the model builder ask for the same text's rows in turn: the last answer per pattern
    is kept (a copy is returned)."""
    last = _last_rows.get(pattern)
    if last is not None and last[0] is source:
        return list(last[1])
    rows = _match_rows(source, pattern)
    if len(_last_rows) > 16:  # patterns made per file (a scaler's own name): keep few texts alive
        _last_rows.clear()
    _last_rows[pattern] = (source, rows)
    return list(rows)


def _match_rows(source: str, pattern: re.Pattern) -> list[int]:
    lits = _literals(pattern.pattern)
    if lits is not None:
        return _literal_rows(source, lits)
    rows: list[int] = []
    last = 0
    row = 1
    for mt in pattern.finditer(source):
        row += source.count("\n", last, mt.start())
        last = mt.start()
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows


# Speed (issue 8): Python's regex engine scans an alternation of words at ~20 MB/s, while
# str.find runs at memory speed. A pattern that is only an alternation of literal words
# (each optionally between \b, with [xX] classes) is therefore searched word by word; the
# rows are the same, since no match spans a line. Any other pattern uses the regex.
# The pattern is read by hand, not by regexes (compiling those cost start-up); the forms it
# accepts are those of the former regexes (tests/test_speed_infra.py compares):
#   whole pattern  \b(?:ALT|ALT...)\b with no parentheses inside, or ALT|ALT...
#   ALT            (\b)?((?:\\[^A-Za-z0-9]|\[[A-Za-z0-9_]+\]|[^\\\[\]().*+?{}|^$])+)(\b)?
_literal_cache: dict[str, list[tuple[str, bool, bool]] | None] = {}
_SPECIAL = frozenset("\\[]().*+?{}|^$")
_CLASS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _alternative(alt: str) -> tuple[list[str], bool, bool] | None:
    """One alternative as (its words, \\b before, \\b after), or None if it is not that simple."""
    before = alt.startswith("\\b")
    i, n = (2 if before else 0), len(alt)
    after = False
    words = [""]
    pieces = 0
    while i < n:
        c = alt[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            d = alt[i + 1]
            if d == "b" and i + 2 == n and pieces:
                after = True
                break
            if d.isascii() and d.isalnum():
                return None
            words = [w + (d if d != "\n" else "\\") for w in words]  # as re.findall's pieces did
            i += 2
        elif c == "[":
            j = alt.find("]", i + 1)
            if j == -1 or j == i + 1 or not _CLASS_CHARS.issuperset(alt[i + 1 : j]):
                return None
            words = [w + ch for w in words for ch in dict.fromkeys(alt[i + 1 : j])]
            i = j + 1
        elif c in _SPECIAL:
            return None
        else:
            if c != "\n":  # re.findall's "." took every piece but a newline
                words = [w + c for w in words]
            i += 1
        pieces += 1
    if not pieces:
        return None
    return words, before, after


def _literals(pat: str) -> list[tuple[str, bool, bool]] | None:
    """``pat`` as (word, \\b before, \\b after) alternatives, or None if it is not that simple."""
    if pat in _literal_cache:
        return _literal_cache[pat]
    out: list[tuple[str, bool, bool]] | None = []
    body, outer = pat, False
    if pat.startswith("\\b(?:") and pat.endswith(")\\b") and len(pat) >= 8 and "\n" not in pat[5:-3]:
        inner = pat[5:-3]
        if "(" not in inner and ")" not in inner:
            body, outer = inner, True
    for alt in body.split("|"):
        got = _alternative(alt)
        if got is None:
            out = None
            break
        words, before, after = got
        out.extend((w, before or outer, after or outer) for w in words)
    if len(_literal_cache) < 256:
        _literal_cache[pat] = out
    return out


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _literal_rows(source: str, lits: list[tuple[str, bool, bool]]) -> list[int]:
    find = source.find
    n = len(source)
    pos: list[int] = []
    for word, b_before, b_after in lits:
        k = len(word)
        if not k:
            continue
        i = find(word)
        while i != -1:
            if b_before and (i > 0 and _is_word(source[i - 1])) == _is_word(word[0]):
                pass
            elif b_after and (i + k < n and _is_word(source[i + k])) == _is_word(word[-1]):
                pass
            else:
                pos.append(i)
            i = find(word, i + 1)
    pos.sort()
    rows: list[int] = []
    last = 0
    row = 1
    count = source.count
    for p in pos:
        row += count("\n", last, p)
        last = p
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows
