"""Jupyter notebooks: check and fix the code cells of an ``.ipynb`` file.

The code cells are joined into one *virtual* Python module, so a scaler made in one cell
and stepped in another is understood, with a line between two cells that holds only the
statement ``__amplint_cell_break__`` (no rule ever anchors a fix there, so the fixer keeps
it; an insertion "before" a cell's first statement lands after it, in the right cell).
IPython syntax that is not Python (``%matplotlib inline``, ``!pip install x``,
``files = !ls``, ``obj?``, a ``%%bash`` cell) is replaced, line for line, by a placeholder
statement ``__amplint_magic_N__`` at the same indentation, so rows never shift. A cell that
parses as Python is left exactly as it is.

Reports translate a virtual row into the notebook's own numbering, as ruff does: the
cell's 1-based index among *all* cells of the notebook, and the row within the cell
(``path:cell 3:2:5``).

Fixes are applied to the virtual module; the result is split back at the cell breaks,
the placeholders are turned back into the original magic lines (a notebook whose magic
lines or cell breaks did not survive is never written), and only the ``"source"`` value
of the cells that changed is replaced in the JSON text: outputs, metadata, key order,
indentation, escapes and the trailing newline stay byte for byte.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass, field

from amplint.diagnostics import FileError, FileResult
from amplint.source import split_lines

CELL_BREAK = "__amplint_cell_break__"
_BREAK_LINE = re.compile(r"__amplint_cell_break__\r?\n?\Z")
_PLACEHOLDER = re.compile(r"([ \t]*)__amplint_magic_(\d+)__(\r?\n)?\Z")
# cell magics whose body is Python (the first line alone is masked)
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "memit", "mprun", "py", "python", "python3", "pypy"}
_HELP = re.compile(r"\s*(?:\?\??[\w.]+|[\w.\[\]()'\"]+\?\??)\s*(?:#.*)?\Z")
_ASSIGN_MAGIC = re.compile(r"\s*[\w.,\[\]() \t*]+=\s*[!%]")


class NotebookError(Exception):
    """The file is not a notebook amplint can read, or fixes cannot be written back safely."""


@dataclass
class _Mask:
    original: str  # the line as in the cell, without its line ending
    indent: str  # the placeholder's indentation
    cell: int  # position in Notebook.code_cells


@dataclass
class Notebook:
    path: str
    raw: str  # the JSON text as read (decoded)
    data: dict
    code_cells: list[int]  # indices into data["cells"] of the Python code cells
    cell_texts: list[str]  # each code cell's source as one string
    masks: dict[int, _Mask]
    virtual: str
    line_map: list[tuple[int, int] | None]  # virtual row - 1 -> (cell number, row in cell); None on a break
    file_source: object = None  # amplint.source.Source of the .ipynb file (fix path)
    _spans: dict | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ positions
    def position(self, row: int) -> tuple[int, int] | None:
        """(cell number, row in cell) for a 1-based virtual row."""
        if 1 <= row <= len(self.line_map):
            hit = self.line_map[row - 1]
            if hit is not None:
                return hit
            for r in range(row, len(self.line_map)):  # a break row: the next cell's first row
                if self.line_map[r] is not None:
                    return self.line_map[r]
        if row > len(self.line_map) and self.line_map:
            last = next((p for p in reversed(self.line_map) if p is not None), None)
            if last is not None:
                return last[0], last[1] + (row - len(self.line_map))
        return None

    def as_source(self, src):
        """The Source of the file with its text replaced by the virtual module (for the fixer)."""
        self.file_source = src
        return src._replace(text=self.virtual)

    # ------------------------------------------------------------------ writing back
    def split(self, virtual: str) -> list[str]:
        """New text of each code cell (magic lines restored) from a fixed virtual module."""
        parts: list[list[str]] = [[]]
        for line in split_lines(virtual):
            if _BREAK_LINE.match(line):
                parts.append([])
            else:
                parts[-1].append(line)
        if len(parts) != len(self.code_cells):
            raise NotebookError("the fixes moved a cell boundary; notebook left untouched")
        seen: set[int] = set()
        cells: list[str] = []
        for pos, lines in enumerate(parts):
            out = []
            for line in lines:
                m = _PLACEHOLDER.match(line)
                if m is not None and int(m.group(2)) in self.masks:
                    k = int(m.group(2))
                    mask = self.masks[k]
                    if k in seen or mask.cell != pos:
                        raise NotebookError("the fixes moved an IPython magic line; notebook left untouched")
                    seen.add(k)
                    indent, nl = m.group(1), m.group(3) or ""
                    if indent == mask.indent:
                        line = mask.original + nl
                    else:  # re-indented with its block
                        line = indent + mask.original.lstrip(" \t") + nl
                elif "__amplint_magic_" in line or CELL_BREAK in line:
                    raise NotebookError("the fixes changed an IPython magic line; notebook left untouched")
                out.append(line)
            text = "".join(out)
            orig = self.cell_texts[pos]
            if not orig.endswith("\n") and text.endswith("\n") and orig != "":
                text = text[:-1]
            cells.append(text)
        if len(seen) != len(self.masks):
            raise NotebookError("the fixes removed an IPython magic line; notebook left untouched")
        return cells

    def render(self, virtual: str) -> str:
        """The notebook's JSON text with the code cells of ``virtual``; only the changed cells'
        ``"source"`` values differ from the text that was read."""
        new_cells = self.split(virtual)
        spans = self._source_spans()
        edits = []
        expected = json.loads(self.raw)
        for pos, (idx, old, new) in enumerate(zip(self.code_cells, self.cell_texts, new_cells)):
            if new == old:
                continue
            start, end = spans[idx]
            old_value = self.data["cells"][idx]["source"]
            new_value = _source_value(new, as_list=isinstance(old_value, list))
            expected["cells"][idx]["source"] = new_value
            edits.append((start, end, self._dump_source(new_value, start, end)))
        text = self.raw
        for start, end, value in sorted(edits, reverse=True):
            text = text[:start] + value + text[end:]
        try:
            ok = json.loads(text) == expected
        except ValueError:
            ok = False
        if not ok:  # pragma: no cover - a bug in the span finder; never write a broken notebook
            raise NotebookError("cannot write the notebook back without reformatting it; left untouched")
        return text

    def diff(self, virtual: str) -> str:
        """A unified diff per changed cell (``path:cell N``)."""
        try:
            new_cells = self.split(virtual)
        except NotebookError:
            new_cells = None
        if new_cells is None:
            return "".join(difflib.unified_diff(self.virtual.splitlines(True), virtual.splitlines(True), self.path, self.path))
        out = []
        for idx, old, new in zip(self.code_cells, self.cell_texts, new_cells):
            if old == new:
                continue
            a = _with_newline(old).splitlines(keepends=True)
            b = _with_newline(new).splitlines(keepends=True)
            name = f"{self.path}:cell {idx + 1}"
            out.append("".join(difflib.unified_diff(a, b, name, name)))
        return "".join(out)

    def _source_spans(self) -> dict[int, tuple[int, int]]:
        if self._spans is None:
            self._spans = _cell_source_spans(self.raw)
        return self._spans

    def _dump_source(self, value, start: int, end: int) -> str:
        ascii_only = "\\u" in self.raw and all(ord(c) < 128 for c in self.raw)
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=ascii_only)
        old_text = self.raw[start:end]
        if not value:
            return "[]"
        m = re.match(r"\[([ \t\r\n]*)", old_text)
        inner = m.group(1) if m and old_text != "[]" else None
        close = re.search(r"([ \t\r\n]*)\]\Z", old_text)
        if inner is None or not inner:  # "[]" or a one-line list: indent one level deeper than the key
            line_start = self.raw.rfind("\n", 0, start) + 1
            key_indent = re.match(r"[ \t]*", self.raw[line_start:start]).group(0)
            unit = _indent_unit(self.raw)
            nl = "\r\n" if "\r\n" in self.raw else "\n"
            if unit is None:
                return json.dumps(value, ensure_ascii=ascii_only)
            inner, close_ws = nl + key_indent + unit, nl + key_indent
        else:
            close_ws = close.group(1) if close else ""
        items = ("," + inner).join(json.dumps(s, ensure_ascii=ascii_only) for s in value)
        return "[" + inner + items + close_ws + "]"


def _with_newline(s: str) -> str:
    return s if s.endswith("\n") or not s else s + "\n"


def _source_value(text: str, as_list: bool):
    if not as_list:
        return text
    return text.splitlines(keepends=True)


def _indent_unit(raw: str) -> str | None:
    m = re.search(r"\n([ \t]+)\S", raw)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------- reading


def _is_python(data: dict) -> bool:
    meta = data.get("metadata") or {}
    lang = (meta.get("language_info") or {}).get("name") or (meta.get("kernelspec") or {}).get("language")
    return lang is None or str(lang).lower() in ("python", "python3", "ipython", "ipython3")


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _magic_line(line: str) -> bool:
    s = line.lstrip(" \t")
    if not s or s.startswith("#"):
        return False
    if s[0] in "%!":
        return True
    return bool(_HELP.match(line.rstrip("\r\n"))) and "?" in s or bool(_ASSIGN_MAGIC.match(line))


def _mask_cell(text: str, pos: int, masks: dict[int, _Mask]) -> str:
    """The cell with its IPython-only lines replaced by placeholders (same line count)."""
    if not text or _parses(text):
        return text
    lines = split_lines(text)

    def put(i: int, indent: str) -> None:
        body = lines[i].rstrip("\r\n")
        nl = lines[i][len(body):]
        k = len(masks)
        masks[k] = _Mask(body, indent, pos)
        lines[i] = f"{indent}__amplint_magic_{k}__{nl}"

    first = lines[0].strip()
    start = 0
    if first.startswith("%%"):
        name = first[2:].split()[0] if first[2:].split() else ""
        if name in PYTHON_CELL_MAGICS:
            put(0, "")
            start = 1
        else:  # the body is not Python (%%bash, %%html, %%writefile, ...)
            for i in range(len(lines)):
                put(i, "")
            return "".join(lines)
    i = start
    while i < len(lines):
        line = lines[i]
        if _magic_line(line):
            indent = re.match(r"[ \t]*", line).group(0)
            put(i, indent)
            while masks[len(masks) - 1].original.endswith("\\") and i + 1 < len(lines):
                i += 1  # a continued magic line
                put(i, indent)
        i += 1
    return "".join(lines)


def load_notebook(text: str, path: str) -> Notebook | None:
    """The notebook's virtual module, or None for a notebook whose kernel is not Python."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"not a valid notebook: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a valid notebook: no `cells` list (nbformat 4 is required)")
    if not _is_python(data):
        return None
    code_cells: list[int] = []
    cell_texts: list[str] = []
    for idx, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list):
            if not all(isinstance(s, str) for s in src):
                raise NotebookError(f"not a valid notebook: cell {idx + 1} has a non-string source line")
            src = "".join(src)
        elif not isinstance(src, str):
            raise NotebookError(f"not a valid notebook: cell {idx + 1} has no source text")
        code_cells.append(idx)
        cell_texts.append(src)
    masks: dict[int, _Mask] = {}
    pieces: list[str] = []
    line_map: list[tuple[int, int] | None] = []
    for pos, (idx, src) in enumerate(zip(code_cells, cell_texts)):
        if pos:
            pieces.append(CELL_BREAK + "\n")
            line_map.append(None)
        masked = _with_newline(_mask_cell(src, pos, masks))
        pieces.append(masked)
        n = len(split_lines(masked))
        line_map.extend((idx + 1, r) for r in range(1, n + 1))
    return Notebook(path, text, data, code_cells, cell_texts, masks, "".join(pieces), line_map)


def _read(path: str) -> Notebook | None:
    from amplint.source import SourceError, read_source

    try:
        return load_notebook(read_source(path).text, path)
    except (SourceError, NotebookError):
        return None


def virtual_text(text: str, path: str) -> str:
    """The virtual module of a notebook's JSON text ("" when it cannot be read)."""
    try:
        nb = load_notebook(text, path)
    except NotebookError:
        return ""
    return nb.virtual if nb is not None else ""


def analyze_notebook_bytes(data: bytes, path: str, index=None) -> FileResult:
    from amplint.analyze import analyze_text
    from amplint.screen import may_contain_amp
    from amplint.source import SourceError, decode

    if not may_contain_amp(data):  # the JSON text holds every token the code cells hold
        return FileResult(path)
    try:
        text, _ = decode(data)
        nb = load_notebook(text, path)
    except (SourceError, NotebookError) as exc:
        return FileResult(path, errors=[FileError("E902", str(exc))])
    if nb is None or not may_contain_amp(nb.virtual.encode("utf-8", "surrogatepass")):
        return FileResult(path)  # not Python, or the tokens were only in outputs/markdown
    return analyze_text(nb.virtual, path, index=index)


# ----------------------------------------------------------------------------- reporting


def translate_messages(messages) -> None:
    """Turn the virtual rows of notebook messages into (cell, row in cell), in place."""
    books: dict[str, Notebook | None] = {}
    for m in messages:
        if not m.path.endswith(".ipynb"):
            continue
        if m.path not in books:
            books[m.path] = _read(m.path)
        nb = books[m.path]
        if nb is None or m.cell is not None or m.code == "E902":
            continue
        start = nb.position(m.row)
        if start is None:
            continue
        end = nb.position(m.end_row)
        m.cell, m.row = start
        if end is None or end[0] != m.cell:
            m.end_row, m.end_col = m.row, max(m.col, m.end_col if m.end_row == m.row else m.col)
        else:
            m.end_row = end[1]
        if m.noqa_row is not None:
            p = nb.position(m.noqa_row)
            m.noqa_row = p[1] if p is not None and p[0] == m.cell else m.row
        if m.edits:
            m.edits = _translate_edits(nb, m.edits, m.cell)


def _translate_edits(nb: Notebook, edits: list[dict], cell: int) -> list[dict]:
    def boundary(row: int):  # a position between lines: the start of `row`, or the end of the row before it
        if 1 <= row <= len(nb.line_map) and nb.line_map[row - 1] is not None and nb.line_map[row - 1][0] == cell:
            return nb.line_map[row - 1]
        prev = nb.position(row - 1) if row > 1 else None
        return (prev[0], prev[1] + 1) if prev is not None else None

    out = []
    for e in edits:
        s = boundary(e["location"]["row"])
        end = boundary(e["end_location"]["row"])
        if s is None or end is None or s[0] != cell or end[0] != cell:
            return []
        end_row = end[1]
        out.append({**e, "location": {**e["location"], "row": s[1]}, "end_location": {**e["end_location"], "row": end_row}})
    return out


# ------------------------------------------------------------------------- JSON positions

_WS = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SCALAR = re.compile(r"true|false|null|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def _skip_ws(s: str, i: int) -> int:
    return _WS.match(s, i).end()


def _skip_value(s: str, i: int) -> int:
    c = s[i : i + 1]
    if c == '"':
        m = _STRING.match(s, i)
        if m is None:
            raise NotebookError("not a valid notebook: unterminated string")
        return m.end()
    if c in ("[", "{"):
        depth = 0
        for m in _TOKEN.finditer(s, i):
            t = m.group()
            if t in "[{":
                depth += 1
            elif t in "]}":
                depth -= 1
                if depth == 0:
                    return m.end()
        raise NotebookError("not a valid notebook: unbalanced brackets")
    m = _SCALAR.match(s, i)
    if m is None:
        raise NotebookError(f"not a valid notebook: unexpected {c!r}")
    return m.end()


def _members(s: str, i: int):
    """Yield (key, value_start, value_end) of the JSON object starting at s[i] == '{'."""
    if s[i] != "{":
        raise NotebookError("not a valid notebook: expected an object")
    i = _skip_ws(s, i + 1)
    if s[i] == "}":
        return
    while True:
        m = _STRING.match(s, i)
        if m is None:
            raise NotebookError("not a valid notebook: expected a key")
        key = json.loads(m.group())
        i = _skip_ws(s, m.end())
        if s[i] != ":":
            raise NotebookError("not a valid notebook: expected ':'")
        start = _skip_ws(s, i + 1)
        end = _skip_value(s, start)
        yield key, start, end
        i = _skip_ws(s, end)
        if s[i] == "}":
            return
        if s[i] != ",":
            raise NotebookError("not a valid notebook: expected ','")
        i = _skip_ws(s, i + 1)


def _elements(s: str, i: int):
    """Yield (value_start, value_end) of the JSON array starting at s[i] == '['."""
    if s[i] != "[":
        raise NotebookError("not a valid notebook: expected an array")
    i = _skip_ws(s, i + 1)
    if s[i] == "]":
        return
    while True:
        end = _skip_value(s, i)
        yield i, end
        i = _skip_ws(s, end)
        if s[i] == "]":
            return
        if s[i] != ",":
            raise NotebookError("not a valid notebook: expected ','")
        i = _skip_ws(s, i + 1)


def _cell_source_spans(raw: str) -> dict[int, tuple[int, int]]:
    """Character span of ``cells[i]["source"]`` in the JSON text, for every cell."""
    spans: dict[int, tuple[int, int]] = {}
    top = _skip_ws(raw, 0)
    for key, start, _end in _members(raw, top):
        if key != "cells":
            continue
        for idx, (cs, _ce) in enumerate(_elements(raw, start)):
            for ckey, vs, ve in _members(raw, cs):
                if ckey == "source":
                    spans[idx] = (vs, ve)
    return spans
