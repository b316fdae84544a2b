"""Parse a file once, with CPython's ``ast``, and only what can matter: blank out top-level functions and classes without an AMP token.

A file passes the byte screen when it holds one AMP token somewhere; most of its top-level
functions and classes usually hold none (model code, utilities), and the loop model never
walks them. ``masked_source`` replaces those definitions with empty lines (so every row and
column of the kept code is unchanged) before ``ast.parse``, which then parses only the kept
code. What is kept: every top-level statement that is not a ``def``/``class`` (imports,
assignments, scripts' loops), and every definition whose lines hold a token the model treats
as relevant (``amplint.tokens.RELEVANT``) or the name of a variable assigned a
``GradScaler(...)``.

Masking is skipped (``None``) for short files, files with ``\\r`` line breaks, and files that
alias ``GradScaler`` under another name. The engine parses the full text whenever the masked
text does not parse or a kept definition did not come out where expected (a ``def`` line
inside a multi-line string would mislead the line scan); a test runs every fixture and rule
example both ways and requires the same findings.
"""

from __future__ import annotations

import ast
import bisect
import re

from amplint.lazyre import lazy
from amplint.diagnostics import FileError
from amplint.tokens import RELEVANT, RELEVANT_WITH_SCALER, SUMMARY_TOKENS, match_rows

MIN_LINES = 200  # below this a parse is cheap anyway

_DEF = lazy(r"(?:async[ \t]+def|def|class)[ \t]")
_SCALER_NAME = lazy(r"[ \t]*(?:self\.)?([A-Za-z_]\w*)\s*(?::[^=\n]*)?=\s*[\w.]*GradScaler\s*\(")
_ALIAS = lazy(r"=\s*[\w.]*GradScaler\s*$", re.M)
_NAME = lazy(r"(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)")
_CLASS = lazy(r"class[ \t]+([A-Za-z_]\w*)")


class Masked:
    """The masked text, the rows (1-based) where kept definitions start, and the names of
    the top-level definitions blanked out (none of them holds a token of the loop model or
    of the project summary, so the summary knows they do nothing it records)."""

    __slots__ = ("text", "kept_defs", "dropped")

    def __init__(self, text: str, kept_defs: list[int], dropped: frozenset[str] = frozenset()):
        self.text = text
        self.kept_defs = kept_defs
        self.dropped = dropped


# A top-level helper that makes an AMP object for its callers: `return torch.autocast(...)`,
# `return GradScaler(...)`, or a @contextmanager entering autocast. Its callers use AMP
# through its name alone (`with amp_ctx():`), so the name is kept like a token.
_RETURNS_AMP = lazy(r"[ \t]+return[ \t]+[\w.]*(?:autocast|GradScaler)[ \t]*\(")  # matched at a line start
_TOP_DEF = lazy(r"^(?:async[ \t]+)?(?:def|(class))[ \t]+([A-Za-z_]\w*)", re.M)  # a top-level def or class


def amp_helpers(text: str) -> set[str]:
    """The names of the top-level functions of ``text`` that return an autocast context or a
    GradScaler (a line scan; the project summary decides, this only keeps their callers)."""
    hits = []  # offsets of `return ...autocast(` / `return ...GradScaler(` lines
    for word in ("autocast", "GradScaler"):
        pos = text.find(word)
        while pos != -1:
            bol = text.rfind("\n", 0, pos) + 1
            if _RETURNS_AMP.match(text, bol) is not None:
                hits.append(bol)
            pos = text.find(word, pos + len(word))
    cm = text.find("contextmanager") if "autocast(" in text else -1
    if not hits and cm == -1:
        return set()
    starts = [(m.start(), None if m.group(1) else m.group(2)) for m in _TOP_DEF.finditer(text)]  # None: a class
    keys = [p for p, _n in starts]
    out: set[str] = set()
    for bol in hits:
        i = bisect.bisect_right(keys, bol) - 1
        if i >= 0 and starts[i][1] is not None:
            out.add(starts[i][1])
    while cm != -1:  # @contextmanager / @contextlib.contextmanager right above a top-level def
        nxt = _TOP_DEF.search(text, cm)
        if nxt is not None and not nxt.group(1) and text.count("\n", cm, nxt.start()) <= 2:
            end = bisect.bisect_right(keys, nxt.start())
            stop = keys[end] if end < len(keys) else len(text)
            if "autocast(" in text[nxt.start():stop]:
                out.add(nxt.group(2))
        cm = text.find("contextmanager", cm + 14)
    return out


def masked_source(text: str, force: bool = False, helpers=()) -> Masked | None:
    if "\r" in text:
        return None
    lines = text.split("\n")
    n = len(lines)
    if n < MIN_LINES and not force:
        return None
    if _ALIAS.search(text):
        return None
    pattern = RELEVANT_WITH_SCALER if ("scaler" in text or "Scaler" in text) else RELEVANT
    rows = match_rows(text, pattern)
    extra = set()
    pos = text.find("GradScaler")
    while pos != -1:  # `name = ...GradScaler(`: look back on the same line only
        bol = text.rfind("\n", 0, pos) + 1
        m = _SCALER_NAME.match(text, bol, text.find("\n", pos) if text.find("\n", pos) != -1 else len(text))
        if m is not None and not pattern.search(m.group(1)):
            extra.add(m.group(1))
        pos = text.find("GradScaler", pos + 10)
    # callers of an AMP helper, this file's or (project mode) one the project defines
    extra.update(n for n in (*amp_helpers(text), *helpers) if not pattern.search(n) and n + "(" in text)
    more = match_rows(text, SUMMARY_TOKENS)  # what the project summary records is kept too
    if extra:
        more += match_rows(text, re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(extra))) + r")\b"))
    rows = sorted(set(rows) | set(more))
    chunks: list[tuple[int, int, int, str | None, bool]] = []  # start, def row, end, name, relevant
    i = 0
    while i < n:
        line = lines[i]
        if not (line.startswith("@") or _DEF.match(line)):
            i += 1
            continue
        start = i
        j = i
        while j < n and lines[j].startswith("@"):
            j += 1
        if j >= n or not _DEF.match(lines[j]):
            i = j + 1 if j == i else j  # a multi-line decorator: leave it to the parser
            continue
        k = j + 1
        while k < n:
            nxt = lines[k]
            if nxt and nxt[0] not in " \t#)]}\f":
                break
            k += 1
        # rows are 1-based; the chunk is lines[start:k] = rows start+1 .. k
        p = bisect.bisect_left(rows, start + 1)
        name = _NAME.match(lines[j]) or _CLASS.match(lines[j])
        chunks.append((start, j, k, name.group(1) if name else None, p < len(rows) and rows[p] <= k))
        i = k
    if all(c[4] for c in chunks):
        return None
    # A function called from kept code may receive the scaler under another name
    # (`def step(loss, opt, gs)`): keep it too, and what it calls in turn.
    masked_rows = set()
    for start, _j, k, _name, rel in chunks:
        if not rel:
            masked_rows.update(range(start, k))
    for _round in range(3):
        kept_text = "\n".join(line for x, line in enumerate(lines) if x not in masked_rows)
        grew = False
        for idx, (start, j, k, name, rel) in enumerate(chunks):
            if not rel and name and (name + "(") in kept_text:
                chunks[idx] = (start, j, k, name, True)
                masked_rows.difference_update(range(start, k))
                grew = True
        if not grew:
            break
    if not masked_rows:
        return None
    out = [("" if x in masked_rows else line) for x, line in enumerate(lines)]
    dropped = frozenset(n for _s, _j, _k, n, rel in chunks if not rel and n)
    if any(n is None for _s, _j, _k, n, rel in chunks if not rel):
        dropped = frozenset()  # a definition whose name the line scan missed: know nothing
    return Masked("\n".join(out), [j + 1 for _s, j, _k, _n, rel in chunks if rel], dropped)


def parse_masked(text: str, filename: str, force: bool = False, helpers=()) -> tuple[ast.Module, frozenset[str]] | None:
    """The tree of the masked text and the names of the definitions blanked out, or None
    when the full text must be parsed instead. ``helpers``: names of the project's AMP
    helpers (functions returning an autocast context or a GradScaler), whose callers are kept."""
    m = masked_source(text, force, helpers)
    if m is None:
        return None
    try:
        tree = ast.parse(m.text, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    starts = {
        node.lineno
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    if any(r not in starts for r in m.kept_defs):
        return None
    return tree, m.dropped


def syntax_error(exc: BaseException) -> FileError:
    if isinstance(exc, SyntaxError):
        row = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        return FileError("E999", f"SyntaxError: {exc.msg}", row, col)
    if isinstance(exc, RecursionError):
        return FileError("E999", "SyntaxError: too deeply nested to parse (recursion limit)")
    if isinstance(exc, MemoryError):
        # CPython's parser raises a bare MemoryError when its stack overflows (e.g. 100k unary minus)
        return FileError("E999", "SyntaxError: too deeply nested or too large to parse (parser stack overflow)")
    return FileError("E999", f"SyntaxError: {exc}")


def parse(text: str, path: str) -> ast.Module:
    return ast.parse(text, filename=path)
