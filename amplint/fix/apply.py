"""Apply fixes with LibCST, re-check, and repeat until nothing changes.

A fix is a tuple of position-anchored actions (``amplint.diagnostics``). They are mapped
onto the LibCST tree through ``PositionProvider`` and carried out by one transformer, so
only the touched statements are re-rendered: comments, quotes, blank lines, tabs, CRLF
line endings all survive. Fixes whose footprints overlap wait for the next pass.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import functools
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from amplint.source import split_lines
from amplint.diagnostics import (
    Fix,
    InsertStatement,
    MoveOutOfWith,
    MoveStatement,
    RenameImportModule,
    ReplaceExpression,
    ReplaceStatement,
    RewriteCall,
)

MAX_PASSES = 10


class FixConflict(Exception):
    pass


class CannotFix(Exception):
    """Python parses the file but LibCST does not (e.g. a backslash continuation before an
    indented statement): the file cannot be fixed and is left as it is."""


@dataclass
class _Plan:
    expr: dict = field(default_factory=dict)  # id(node) -> new expression
    before: dict = field(default_factory=dict)  # id(stmt) -> [statements]
    after: dict = field(default_factory=dict)
    replace: dict = field(default_factory=dict)  # id(stmt) -> [statements] (empty: delete)
    move: dict = field(default_factory=dict)  # id(with) -> index of first moved statement
    call: dict = field(default_factory=dict)  # id(call) -> (new func or None, [args to prepend])
    module: dict = field(default_factory=dict)  # id(import from) -> new module expression


class _Index:
    def __init__(self, module: cst.Module):
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.pos = wrapper.resolve(PositionProvider)
        self.stmt_at: dict[tuple[int, int], cst.CSTNode] = {}
        # small statements: start -> (container line or one-line suite, the small statement)
        self.small_at: dict[tuple[int, int], tuple[cst.CSTNode, cst.BaseSmallStatement]] = {}
        self.expr_at: dict[tuple[int, int, int, int], cst.CSTNode] = {}
        self.by_id: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}
        for node, rng in self.pos.items():
            start = (rng.start.line, rng.start.column)
            self.by_id[id(node)] = (start, (rng.end.line, rng.end.column))
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                self.stmt_at.setdefault(start, node)
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    srng = self.pos[small]
                    self.small_at[(srng.start.line, srng.start.column)] = (node, small)
            elif isinstance(node, cst.BaseExpression):
                key = (rng.start.line, rng.start.column, rng.end.line, rng.end.column)
                self.expr_at.setdefault(key, node)

    def stmt(self, anchor) -> cst.CSTNode:
        """The unit an edit at ``anchor`` addresses: a whole line when the statement is alone
        on it, else the one small statement (``a; b`` or a one-line suite ``if c: a; b``),
        never its neighbours; or a compound statement."""
        hit = self.small_at.get(tuple(anchor))
        if hit is not None:
            container, small = hit
            if isinstance(container, cst.SimpleStatementLine) and len(container.body) == 1:
                return container
            return small
        node = self.stmt_at.get(tuple(anchor))
        if node is None:
            raise FixConflict(f"no statement at {anchor}")
        return node

    def line(self, anchor) -> cst.CSTNode:
        """The whole line of the statement at ``anchor``, when it starts that line (a move
        takes whole lines; it cannot split ``a; b``)."""
        hit = self.small_at.get(tuple(anchor))
        if hit is not None:
            container, small = hit
            if not isinstance(container, cst.SimpleStatementLine) or container.body[0] is not small:
                raise FixConflict(f"statement at {anchor} shares its line with an earlier one")
            return container
        return self.stmt(anchor)

    def import_from(self, anchor) -> cst.ImportFrom:
        hit = self.small_at.get(tuple(anchor))
        if hit is None or not isinstance(hit[1], cst.ImportFrom):
            raise FixConflict(f"no `from ... import` at {anchor}")
        return hit[1]

    def span(self, node) -> tuple[tuple[int, int], tuple[int, int]]:
        r = self.pos[node]
        return (r.start.line, r.start.column), (r.end.line, r.end.column)


def _parse_statements(code: str) -> list[cst.BaseStatement]:
    if not code.strip():
        return []
    return list(cst.parse_module(code if code.endswith("\n") else code + "\n").body)


def _small_statements(stmts: list) -> list[cst.BaseSmallStatement]:
    """``stmts`` as small statements (for an edit inside ``a; b`` or a one-line suite)."""
    out: list[cst.BaseSmallStatement] = []
    for st in stmts:
        if not isinstance(st, cst.SimpleStatementLine):
            raise FixConflict("a compound statement cannot go on a line shared with other statements")
        out.extend(sm.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for sm in st.body)
    return out


def _footprint(index: _Index, fix: Fix) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    out = []
    for a in fix.actions:
        if isinstance(a, (InsertStatement, ReplaceStatement)):
            out.append(index.span(index.stmt(a.anchor)))
        elif isinstance(a, MoveOutOfWith):
            out.append(index.span(index.stmt(a.with_anchor)))
        elif isinstance(a, MoveStatement):
            out.append(index.span(index.stmt(a.anchor)))
            out.append(index.span(index.stmt(a.to)))
        elif isinstance(a, (ReplaceExpression, RewriteCall)):
            out.append((tuple(a.start), tuple(a.end)))
        elif isinstance(a, RenameImportModule):
            out.append(index.span(index.import_from(a.anchor)))
    return out


def _overlaps(a, b) -> bool:
    for s1, e1 in a:
        for s2, e2 in b:
            if s1 < e2 and s2 < e1:
                return True
    return False


def _plan_fix(index: _Index, plan: _Plan, fix: Fix) -> None:
    for a in fix.actions:
        if isinstance(a, InsertStatement):
            node = index.stmt(a.anchor)
            code = _parse_statements(a.code)
            if isinstance(node, cst.BaseSmallStatement):
                code = _small_statements(code)
            target = plan.after if a.where == "after" else plan.before
            target.setdefault(id(node), []).extend(code)
        elif isinstance(a, ReplaceStatement):
            node = index.stmt(a.anchor)
            code = _parse_statements(a.code)
            if isinstance(node, cst.BaseSmallStatement):
                code = _small_statements(code)
            plan.replace[id(node)] = code
        elif isinstance(a, ReplaceExpression):
            key = (a.start[0], a.start[1], a.end[0], a.end[1])
            node = index.expr_at.get(key)
            if node is None:
                raise FixConflict(f"no expression at {key}")
            plan.expr[id(node)] = cst.parse_expression(a.code)
        elif isinstance(a, MoveStatement):
            node, dst = index.stmt(a.anchor), index.stmt(a.to)
            if isinstance(node, cst.BaseSmallStatement):
                node = node.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                moved = [node] if isinstance(dst, cst.BaseSmallStatement) else [cst.SimpleStatementLine([node])]
            elif isinstance(dst, cst.BaseSmallStatement):
                if not isinstance(node, cst.SimpleStatementLine):
                    raise FixConflict("a compound statement cannot go on a line shared with other statements")
                moved = list(node.body)
            else:
                moved = [node]
            plan.replace[id(index.stmt(a.anchor))] = []
            plan.after.setdefault(id(dst), []).extend(moved)
        elif isinstance(a, RewriteCall):
            key = (a.start[0], a.start[1], a.end[0], a.end[1])
            node = index.expr_at.get(key)
            if not isinstance(node, cst.Call):
                raise FixConflict(f"no call at {key}")
            func = cst.parse_expression(a.func) if a.func is not None else None
            plan.call[id(node)] = (func, [cst.Arg(cst.parse_expression(x)) for x in a.prepend])
        elif isinstance(a, RenameImportModule):
            node = index.import_from(a.anchor)
            plan.module[id(node)] = cst.parse_expression(a.module)
        elif isinstance(a, MoveOutOfWith):
            w = index.stmt(a.with_anchor)
            first = index.line(a.first)
            if not isinstance(w, cst.With) or not isinstance(w.body, cst.IndentedBlock):
                raise FixConflict("not a with block")
            body = list(w.body.body)
            if first not in body or body.index(first) == 0:
                raise FixConflict("statement is not in the with block")
            plan.move[id(w)] = body.index(first)


class _Apply(cst.CSTTransformer):
    def __init__(self, plan: _Plan, index: "_Index | None" = None):
        self.plan = plan
        self.holders: set[int] = set()  # placeholders carrying a deleted statement's comments
        # Only descend into nodes that contain a target: a fix re-renders its statements,
        # not the whole module (LibCST's full traversal is most of the cost on big files).
        self.by_id = index.by_id if index is not None else None
        ids = set(plan.expr) | set(plan.before) | set(plan.after) | set(plan.replace) | set(plan.move) | set(plan.call) | set(plan.module)
        self.targets = [self.by_id[i] for i in ids if self.by_id is not None and i in self.by_id]
        if self.by_id is not None and len(self.targets) != len(ids):
            self.by_id = None  # a target without a position: visit everything

    def on_visit(self, node) -> bool:
        if self.by_id is None:
            return True
        r = self.by_id.get(id(node))
        if r is None or getattr(node, "decorators", None) or isinstance(node, cst.IndentedBlock):
            # a decorated def's range (and its block's) starts at `def`, after the decorators
            return True
        start, end = r
        return any(start <= t0 and t1 <= end for t0, t1 in self.targets)

    def on_leave(self, original, updated):
        oid = id(original)
        p = self.plan
        if oid in p.expr:
            new = p.expr[oid]
            if getattr(updated, "lpar", None) and hasattr(new, "lpar"):
                new = new.with_changes(lpar=updated.lpar, rpar=updated.rpar)
            return new
        if oid in p.call:
            return _rewrite_call(updated, *p.call[oid])
        if oid in p.module:
            return updated.with_changes(module=p.module[oid])
        if oid in p.before or oid in p.after or oid in p.replace or oid in p.move:
            out: list = list(p.before.get(oid, []))
            if oid in p.replace:
                repl = p.replace[oid]
                if repl and hasattr(updated, "leading_lines") and hasattr(repl[0], "leading_lines"):
                    repl = [repl[0].with_changes(leading_lines=updated.leading_lines), *repl[1:]]
                out.extend(repl)
            elif oid in p.move:
                idx = p.move[oid]
                body = list(updated.body.body)
                out.append(updated.with_changes(body=updated.body.with_changes(body=body[:idx])))
                out.extend(body[idx:])
            else:
                out.append(updated)
            out.extend(p.after.get(oid, []))
            if not out:
                return self._removed(updated)
            return cst.FlattenSentinel(out)
        return super().on_leave(original, updated)  # leave_IndentedBlock & co.

    def _removed(self, node):
        """A deleted statement's comments (the lines above it, the one after it) stay: a
        placeholder carries them to the next statement of the block (leave_IndentedBlock)."""
        lines = list(getattr(node, "leading_lines", ()))
        trailing = getattr(getattr(node, "trailing_whitespace", None), "comment", None)
        if trailing is not None:
            lines.append(cst.EmptyLine(comment=trailing))
        if not any(ln.comment is not None for ln in lines):
            return cst.RemovalSentinel.REMOVE
        holder = cst.SimpleStatementLine([cst.Pass()], leading_lines=lines)
        self.holders.add(id(holder))
        return holder

    def _carry(self, body):
        out, carry = [], []
        for st in body:
            if id(st) in self.holders:
                carry.extend(st.leading_lines)
                continue
            if carry:
                st = st.with_changes(leading_lines=[*carry, *st.leading_lines])
                carry = []
            out.append(st)
        return out, carry

    def leave_Module(self, original, updated):
        body, carry = self._carry(updated.body)
        if carry or len(body) != len(updated.body):
            return updated.with_changes(body=body, footer=[*carry, *updated.footer])
        return updated

    def leave_IndentedBlock(self, original, updated):
        body, carry = self._carry(updated.body)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        if carry or len(body) != len(updated.body) or not updated.body:
            return updated.with_changes(body=body, footer=[*carry, *updated.footer])
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        if updated.body is original.body:
            return updated
        if not updated.body:  # every small statement of the line was deleted
            return self._removed(updated)
        return updated.with_changes(body=_tidy_semicolons(updated.body))

    def leave_SimpleStatementSuite(self, original, updated):
        if updated.body is original.body:
            return updated
        if not updated.body:
            return updated.with_changes(body=[cst.Pass()])
        return updated.with_changes(body=_tidy_semicolons(updated.body))


def _rewrite_call(call: cst.Call, func, prepend: list) -> cst.Call:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    new = [a.with_changes(comma=comma) for a in prepend[:-1]] + prepend[-1:]
    if new and call.args:
        new[-1] = new[-1].with_changes(comma=comma)
    changes: dict = {"args": [*new, *call.args]}
    if func is not None:
        changes["func"] = func
    return call.with_changes(**changes)


def _tidy_semicolons(body) -> list:
    """After an edit inside ``a; b``: no trailing ``;`` on the last small statement."""
    body = list(body)
    last = body[-1]
    if isinstance(last.semicolon, cst.Semicolon):
        body[-1] = last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return body


WINDOW_MIN_LINES = 2000  # from this size on, LibCST sees only the top-level statements fixed


def apply_fixes(text: str, fixes: list[Fix]) -> tuple[str, list[Fix]]:
    """Apply the non-overlapping fixes (in order); return the new text and those applied."""
    if text.count("\n") >= WINDOW_MIN_LINES:
        windowed = _apply_windowed(text, fixes)
        if windowed is not None:
            return windowed
    return _apply_whole(text, fixes)


def _action_rows(fix: Fix) -> list[int]:
    rows = []
    for a in fix.actions:
        if isinstance(a, (InsertStatement, ReplaceStatement)):
            rows.append(a.anchor[0])
        elif isinstance(a, (ReplaceExpression, RewriteCall)):
            rows += [a.start[0], a.end[0]]
        elif isinstance(a, RenameImportModule):
            rows.append(a.anchor[0])
        elif isinstance(a, MoveOutOfWith):
            rows += [a.with_anchor[0], a.first[0]]
        elif isinstance(a, MoveStatement):
            rows += [a.anchor[0], a.to[0]]
    return rows


def _shift(fix: Fix, off: int) -> Fix:
    def row(p):
        return (p[0] - off, p[1])

    acts = []
    for a in fix.actions:
        if isinstance(a, (InsertStatement, ReplaceStatement, RenameImportModule)):
            a = a._replace(anchor=row(a.anchor))
        elif isinstance(a, (ReplaceExpression, RewriteCall)):
            a = a._replace(start=row(a.start), end=row(a.end))
        elif isinstance(a, MoveOutOfWith):
            a = a._replace(with_anchor=row(a.with_anchor), first=row(a.first))
        elif isinstance(a, MoveStatement):
            a = a._replace(anchor=row(a.anchor), to=row(a.to))
        acts.append(a)
    return fix._replace(actions=tuple(acts))


@functools.lru_cache(maxsize=4)  # edits_for asks once per fix of the same text
def _top_level_spans(text: str):
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    spans: list[tuple[int, int]] = []
    for st in tree.body:
        start = min([st.lineno, *(d.lineno for d in getattr(st, "decorator_list", []))])
        end = st.end_lineno or st.lineno
        if spans and start <= spans[-1][1]:  # `a = 1; b = 2` share a row
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans, [s for s, _ in spans]


def _apply_windowed(text: str, fixes: list[Fix]):
    """LibCST parses, indexes and re-renders a 50,000-line file in ~20 s, per pass and per
    `--output-format json` edit. Fixes never reach beyond the top-level statement they anchor
    in, so each group of fixes is applied to the rows of its top-level statement alone and
    spliced back. None: not applicable (the caller works on the whole module)."""
    found = _top_level_spans(text)
    if found is None:
        return None
    spans, starts = found
    groups: dict[int, list[Fix]] = {}
    for fix in fixes:
        where = set()
        for r in _action_rows(fix):
            i = bisect.bisect_right(starts, r) - 1
            if i < 0 or r > spans[i][1]:
                return None
            where.add(i)
        if len(where) != 1:
            return None
        groups.setdefault(where.pop(), []).append(fix)
    lines = split_lines(text)
    applied_ids: set[int] = set()
    for i in sorted(groups, reverse=True):  # bottom-up: earlier rows stay valid
        s, e = spans[i]
        shifted = [_shift(f, s - 1) for f in groups[i]]
        try:
            new_window, applied = _apply_whole("".join(lines[s - 1 : e]), shifted)
        except cst.ParserSyntaxError:
            return None  # the window alone does not parse: the whole module decides
        if not applied:
            continue
        lines[s - 1 : e] = [new_window]
        done = {id(f) for f in applied}
        applied_ids |= {id(orig) for orig, sh in zip(groups[i], shifted) if id(sh) in done}
    applied_all = [f for f in fixes if id(f) in applied_ids]
    if not applied_all:
        return text, []
    return "".join(lines), applied_all


@functools.lru_cache(maxsize=2)
def _parsed(text: str):
    """LibCST module and position index of ``text``. Trees are immutable, so `edits_for`
    (one call per fix of the same file) parses and indexes a file once, not once per fix."""
    module = cst.parse_module(text)
    return module, _Index(module)


def _apply_whole(text: str, fixes: list[Fix]) -> tuple[str, list[Fix]]:
    module, index = _parsed(text)
    plan = _Plan()
    taken: list = []
    applied: list[Fix] = []
    for fix in fixes:
        try:
            fp = _footprint(index, fix)
            if any(_overlaps(fp, t) for t in taken):
                continue
            trial = _Plan(**{k: dict(v) for k, v in vars(plan).items()})
            _plan_fix(index, trial, fix)
        except (FixConflict, cst.ParserSyntaxError):
            continue
        plan = trial
        taken.append(fp)
        applied.append(fix)
    if not applied:
        return text, []
    new_module = module.visit(_Apply(plan, index))
    return new_module.code, applied


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        if text.count("\n") < WINDOW_MIN_LINES:  # big files are fixed in windows LibCST rendered
            cst.parse_module(text)
        return True
    except Exception:
        return False


def fix_text(text: str, path: str, want, max_passes: int = MAX_PASSES):
    """Fix ``text`` to a fixed point. ``want(diagnostic, lines) -> bool`` says which findings to
    fix (given the diagnostic and the current text's lines, for noqa). Returns
    (new_text, number_of_findings_fixed, converged).

    The count is the number of findings that had an applicable fix and are gone afterwards
    (per code), so it agrees with `check`'s "[*] N fixable" when every fix applies, and two
    findings removed by one shared edit count as two."""
    from collections import Counter

    from amplint.analyze import analyze_text

    original = text
    first = None
    converged = False
    for _ in range(max_passes):
        result = analyze_text(text, path)
        if first is None:
            first = result
        if result.errors:
            break
        lines = split_lines(text)
        fixes = [d.fix for d in result.diagnostics if d.fix is not None and want(d, lines)]
        if not fixes:
            converged = True
            break
        try:
            new_text, applied = apply_fixes(text, fixes)
        except cst.ParserSyntaxError as exc:
            if text == original:
                raise CannotFix(f"LibCST cannot parse it (line {exc.raw_line}: {exc.message})") from None
            converged = True  # what the earlier passes fixed stands (it parsed with Python)
            break
        if not applied or new_text == text:
            converged = True
            break
        if not _parses(new_text):
            # never write code that does not parse: try the fixes one at a time
            for fx in applied:
                single, ok = apply_fixes(text, [fx])
                if ok and single != text and _parses(single):
                    text = single
                    break
            else:
                converged = True
                break
            continue
        text = new_text
    if text == original:
        return text, 0, converged or not first.diagnostics
    lines0 = split_lines(original)
    fixable = Counter(d.code for d in first.diagnostics if d.fix is not None and want(d, lines0))
    before = Counter(d.code for d in first.diagnostics)
    last = analyze_text(text, path)
    after = Counter(d.code for d in last.diagnostics)
    fixed = sum(min(n, max(0, before[c] - after[c])) for c, n in fixable.items())
    if not converged:
        lines = split_lines(text)
        converged = not any(d.fix is not None and want(d, lines) for d in last.diagnostics)
    return text, fixed, converged


def edits_for(text: str, fix: Fix) -> list[dict]:
    """Ruff-style edits (content, location, end_location; 1-based) for one fix. Only the
    top-level statement the fix touches is parsed and re-rendered (one call per fix)."""
    windowed = _apply_windowed(text, [fix])
    new_text, applied = windowed if windowed is not None else _apply_whole(text, [fix])
    if not applied:
        return []
    a = split_lines(text)
    b = split_lines(new_text)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        edits.append(
            {
                "content": "".join(b[j1:j2]),
                "location": {"row": i1 + 1, "column": 1},
                "end_location": {"row": i2 + 1, "column": 1},
            }
        )
    return edits


def unified_diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            split_lines(old),
            split_lines(new),
            fromfile=path,
            tofile=path,
        )
    )
