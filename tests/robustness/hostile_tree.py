"""The hostile tree: every kind of file a repository may hold, with what amplint must say.

``build(root)`` writes it and returns {relative path: Expect}. Files that must be checked hold
the FLAGGED loop, so a finding (AMP001 at a known row) proves they were parsed and analysed.
Files that cannot be checked hold the word ``GradScaler`` so they pass the byte pre-screen (a file
that cannot hold AMP code is skipped unread by design, like an unparsable one).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from robustness_util import FLAGGED, FLAGGED_ROW


@dataclass(frozen=True)
class Expect:
    code: str | None  # "AMP001" for a checked file, "E999"/"E902" for a per-file error, None: silent
    row: int | None = None  # for AMP001: the row; for errors: None (any row)
    message: str = ""  # a substring of the per-file error message
    what: str = ""  # a description for the evidence table
    heavy: bool = False  # seconds to parse: checked in fewer output formats


def _flagged(prefix: str = "", suffix: str = "", eol: str = "\n") -> tuple[bytes, int]:
    text = prefix + FLAGGED + suffix
    row = prefix.count("\n") + FLAGGED_ROW
    return text.replace("\n", eol).encode("utf-8"), row


def _cases():
    """(name, content bytes or a callable(path) making the entry, Expect)."""
    v = sys.version_info
    ok = "AMP001"
    yield "empty.py", b"", Expect(None, what="empty file")
    yield "blank.py", b"\n\n   \n\t\n", Expect(None, what="only blank lines")
    data, row = _flagged()
    yield "plain.py", data, Expect(ok, row, what="plain file with a finding")
    data, row = _flagged(
        suffix="match scaler:\n    case {'a': [1, *rest]} if rest:\n        pass\n    case _:\n        pass\n"
    )
    yield "match_stmt.py", data, Expect(ok, row, what="`match` statement (3.10)")
    data, row = _flagged(prefix="with (open('a') as f,\n      open('b') as g):\n    pass\n")
    yield "paren_with.py", data, Expect(ok, row, what="parenthesized context managers (3.10)")
    if v >= (3, 11):
        data, row = _flagged(prefix="try:\n    pass\nexcept* ValueError as eg:\n    pass\n")
        yield "except_star.py", data, Expect(ok, row, what="`except*` (3.11)")
    if v >= (3, 12):
        data, row = _flagged(prefix='type Alias[T] = list[T]\ndef first[T](xs: list[T]) -> T:\n    return f"{"nested"}" and xs[0]\n')
        yield "pep695.py", data, Expect(ok, row, what="type params, `type` alias, nested f-string quotes (3.12)")
    if v >= (3, 13):
        data, row = _flagged(prefix="def f[T = int](x: T) -> T:\n    return x\n")
        yield "pep696.py", data, Expect(ok, row, what="type parameter defaults (3.13)")
    if v >= (3, 14):
        data, row = _flagged(prefix="try:\n    pass\nexcept ValueError, TypeError:\n    pass\nt = t'{1}'\n")
        yield "py314.py", data, Expect(ok, row, what="unparenthesized except, t-string (3.14)")
    data, row = _flagged()
    yield "bom.py", b"\xef\xbb\xbf" + data, Expect(ok, row, what="UTF-8 BOM")
    data, row = _flagged(eol="\r\n")
    yield "crlf.py", data, Expect(ok, row, what="CRLF line endings")
    lines = FLAGGED.splitlines(keepends=True)
    mixed = "".join(l.replace("\n", "\r\n") if i % 2 else l for i, l in enumerate(lines))
    yield "mixed_eol.py", mixed.encode(), Expect(ok, FLAGGED_ROW, what="mixed LF/CRLF line endings")
    yield "tabs.py", FLAGGED.replace("        ", "\t\t").replace("    ", "\t").encode(), Expect(ok, FLAGGED_ROW, what="tab indentation")
    data, row = _flagged(prefix="# -*- coding: latin-1 -*-\n")
    yield "latin1_declared.py", data + 's = "caf\xe9"\n'.encode("latin-1"), Expect(ok, row, what="latin-1 bytes with a coding cookie")
    big = "".join(f"x{i} = {i}\n" for i in range(50_000))
    data, row = _flagged(prefix=big)
    yield "big_50k_lines.py", data, Expect(ok, row, what="50,000-line file", heavy=True)
    data, row = _flagged(prefix='s = "' + "x" * 1_000_000 + '"\n')
    yield "line_1mb.py", data, Expect(ok, row, what="a 1 MB line", heavy=True)
    data, row = _flagged(prefix="y = " + "[" * 50 + "]" * 50 + "\nz = " + "+".join(["a"] * 300) + "\n")
    yield "nested_ok.py", data, Expect(ok, row, what="50 nested lists, a 300-term sum")
    data, row = _flagged()
    yield "with space.py", data, Expect(ok, row, what="a space in the name")
    yield "ünïcödé_名前.py", data, Expect(ok, row, what="a non-ASCII name")
    yield "x.py/inner.py", data, Expect(ok, row, what="a directory named x.py (walked)")
    yield "loop/inside.py", data, Expect(ok, row, what="a file in a directory with a symlink loop")
    yield "loop/self", lambda p: os.symlink("..", p), None

    # per-file syntax errors
    yield "py2_print.py", b'print "hello"\nGradScaler = 1\n', Expect("E999", message="print", what="Python 2 print statement")
    yield "py2_octal.py", b"GradScaler = 0777\n", Expect("E999", message="SyntaxError", what="Python 2 octal literal")
    yield "unterminated.py", b'GradScaler = "abc\n', Expect("E999", message="unterminated string", what="unterminated string")
    yield "unterminated_triple.py", b'GradScaler = """abc\n\n', Expect("E999", message="unterminated triple-quoted", what="unterminated triple-quoted string")
    yield "null_byte.py", b"GradScaler = 1\x00\n", Expect("E999", message="null", what="a null byte")
    yield "tabs_inconsistent.py", b"if GradScaler:\n\tx = 1\n        y = 2\n", Expect("E999", message="tabs", what="inconsistent tabs and spaces")
    n = 100_000
    yield "deep_parens.py", b"GradScaler = " + b"(" * n + b"1" + b")" * n + b"\n", Expect("E999", message="nested", what="100k nested parentheses", heavy=True)
    yield "deep_lists.py", b"GradScaler = " + b"[" * n + b"]" * n + b"\n", Expect("E999", message="nested", what="100k nested lists", heavy=True)
    yield "deep_calls.py", b"GradScaler = " + b"f(" * n + b")" * n + b"\n", Expect("E999", message="nested", what="100k nested calls", heavy=True)
    yield "deep_sum.py", b"GradScaler = " + b"+".join([b"a"] * n) + b"\n", Expect("E999", message="nested", what="`a+a+...` chain of 100k terms", heavy=True)
    yield "deep_sum_5k.py", b"GradScaler = " + b"+".join([b"a"] * 5000) + b"\n", Expect("E999", message="nested", what="`a+a+...` chain of 5k terms")
    yield "deep_attr.py", b"GradScaler = a" + b".b" * n + b"\n", Expect("E999", message="nested", what="100k-long attribute chain", heavy=True)
    yield "deep_unary.py", b"GradScaler = " + b"-" * n + b"1\n", Expect("E999", message="nested", what="100k unary minus", heavy=True)
    yield "deep_indent.py", b"GradScaler = 1\n" + b"".join(b"    " * i + b"if x:\n" for i in range(101)) + b"    " * 101 + b"pass\n", Expect("E999", message="indentation", what="101 nested blocks")

    # per-file I/O and decoding errors
    yield "non_utf8.py", b'GradScaler = "caf\xe9"\n', Expect("E902", message="", what="latin-1 bytes, no coding cookie")
    yield "bad_cookie.py", b"# coding: no-such-codec\nGradScaler = 1\n", Expect("E902", message="encoding", what="unknown coding cookie")
    yield "broken_link.py", lambda p: os.symlink("does-not-exist.py", p), Expect("E902", message="No such file", what="broken symlink")
    yield "link_loop_a.py", lambda p: os.symlink("link_loop_b.py", p), Expect("E902", message="symbolic links", what="symlink loop (file)")
    yield "link_loop_b.py", lambda p: os.symlink("link_loop_a.py", p), Expect("E902", message="symbolic links", what="symlink loop (file)")
    if hasattr(os, "mkfifo"):
        yield "fifo.py", lambda p: os.mkfifo(p), Expect("E902", message="Not a regular file", what="a FIFO named fifo.py")
    if os.path.exists("/dev/zero"):
        yield "dev_zero.py", lambda p: os.symlink("/dev/zero", p), Expect("E902", message="Not a regular file", what="a symlink to /dev/zero")


def build(root: str, heavy: bool | None = None) -> dict[str, Expect]:
    """Write the tree; ``heavy``: True only the slow-to-parse files, False all but those."""
    expect: dict[str, Expect] = {}
    for name, content, exp in _cases():
        if heavy is not None and exp is not None and exp.heavy != heavy:
            continue
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if callable(content):
            content(path)
        else:
            with open(path, "wb") as fh:
                fh.write(content)
        if exp is not None:
            expect[name] = exp
    return expect
