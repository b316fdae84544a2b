"""Small syntactic queries over one function's statements that the walker does not record:
statement parents, the branch arm each statement sits in, enclosing loops, and jump
statements (``continue``/``break``/``return``). Derived from the AST on demand, cached on the
model (``FileModel.dispose`` clears it with the rest)."""

from __future__ import annotations

import ast
import re

from amplint.lazyre import lazy

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def parents(model, func) -> dict[int, tuple[ast.AST, str, int]]:
    """id(stmt) -> (parent node, field, index in an except/match list or -1) for every
    statement of ``func``'s body, not descending into nested functions or classes."""
    cache = model.__dict__.setdefault("_qx_parents", {})
    got = cache.get(id(func.node))
    if got is not None:
        return got
    out: dict[int, tuple[ast.AST, str, int]] = {}

    def block(owner, field, stmts, idx=-1):
        for s in stmts:
            out[id(s)] = (owner, field, idx)
            visit(s)

    def visit(s):
        if isinstance(s, _DEFS):
            return
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                block(s, field, sub)
        for i, h in enumerate(getattr(s, "handlers", []) or []):
            block(s, "handlers", h.body, i)
        for i, case in enumerate(getattr(s, "cases", []) or []):
            block(s, "cases", case.body, i)

    node = func.node
    if isinstance(node, ast.Module):
        block(node, "body", node.body)
    else:
        block(node, "body", getattr(node, "body", []))
    cache[id(func.node)] = out
    return out


def ancestry(model, func, stmt) -> list[tuple[ast.AST, str, int]]:
    """The chain (parent, field, index) from ``stmt`` up to the function, innermost first."""
    ps = parents(model, func)
    chain = []
    cur = stmt
    while id(cur) in ps:
        p = ps[id(cur)]
        chain.append(p)
        cur = p[0]
        if cur is func.node:
            break
    return chain


def _arms(model, func, stmt) -> dict[int, tuple[str, int]]:
    """Branch points above ``stmt`` and the arm it is in (If body/orelse, Try body/handler i/
    orelse/finalbody, Match case i)."""
    out = {}
    for owner, field, idx in ancestry(model, func, stmt):
        if isinstance(owner, (ast.If, ast.Try)) or type(owner).__name__ in ("TryStar", "Match"):
            out[id(owner)] = (field, idx)
    return out


def exclusive_stmts(model, func, a: ast.stmt, b: ast.stmt) -> bool:
    """``a`` and ``b`` sit in different arms of one ``if``/``match`` (or one is in a ``try``
    body and the other in one of its handlers, which precision counts as exclusive)."""
    xa, xb = _arms(model, func, a), _arms(model, func, b)
    for k, arm in xa.items():
        other = xb.get(k)
        if other is None or other == arm:
            continue
        if "finalbody" in (arm[0], other[0]):
            continue  # a finally block runs on every path
        return True
    return False


def enclosing_loops(model, func, stmt) -> list[ast.AST]:
    """Loops around ``stmt`` inside ``func``, innermost first."""
    return [owner for owner, field, _i in ancestry(model, func, stmt) if isinstance(owner, LOOPS) and field == "body"]


def contains(outer: ast.AST, stmt: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (stmt.lineno, stmt.col_offset) and (
        (stmt.end_lineno, stmt.end_col_offset) <= (outer.end_lineno, outer.end_col_offset)
    )


def jumps(model, func) -> list[ast.stmt]:
    """Every ``continue``/``break``/``return`` of ``func`` (not of nested functions)."""
    return [
        s
        for s in _all_stmts(model, func)
        if isinstance(s, (ast.Continue, ast.Break, ast.Return))
    ]


def _all_stmts(model, func) -> list[ast.stmt]:
    ps = parents(model, func)
    out = []

    def walk(stmts):
        for s in stmts:
            if id(s) in ps:
                out.append(s)
            if isinstance(s, _DEFS):
                continue
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(s, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    walk(sub)
            for h in getattr(s, "handlers", []) or []:
                walk(h.body)
            for case in getattr(s, "cases", []) or []:
                walk(case.body)

    walk(getattr(func.node, "body", []))
    return out


def pos(node: ast.AST) -> tuple[int, int]:
    return (node.lineno, node.col_offset)


def end_pos(node: ast.AST) -> tuple[int, int]:
    return (node.end_lineno, node.end_col_offset)


def calls_in_loops(model, name: str, method: bool):
    """Calls of the function ``name`` (``self.name(...)`` when ``method``) that sit inside a
    loop of the function around them, over the whole file (walked or not): (call, loop).

    The tree may be the masked one (definitions without an AMP token are stubbed out before
    parsing, amplint/parse.py), which hides callers; when the name is called in the text but
    no caller is found, the full text is parsed once (rows are the same) and scanned."""
    out = _calls_in_loops(model.tree, name, method)
    if out or model.source.count(name + "(") < 2:
        return out
    full = model.__dict__.get("_qx_full_tree")
    if full is None:
        try:
            full = ast.parse(model.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            full = ast.Module(body=[], type_ignores=[])
        model.__dict__["_qx_full_tree"] = full
    return _calls_in_loops(full, name, method)


def _calls_in_loops(tree, name: str, method: bool):
    out = []

    def visit(node, loop):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, None)
                continue
            if isinstance(child, ast.ClassDef):
                visit(child, None)
                continue
            inner = loop
            if isinstance(node, LOOPS) and child in getattr(node, "body", []):
                inner = node
            if isinstance(child, ast.Call) and inner is not None:
                fn = child.func
                if (not method and isinstance(fn, ast.Name) and fn.id == name) or (
                    method and isinstance(fn, ast.Attribute) and fn.attr == name and isinstance(fn.value, ast.Name)
                    and fn.value.id == "self"
                ):
                    out.append((child, inner))
            visit(child, inner)

    visit(tree, None)
    return out


def abandons(model, func, stmt):
    """Does the block holding ``stmt`` end, after it, with ``break``/``continue``/``return``/
    ``raise`` (``zero_grad(); scaler.step(opt); scaler.update(); break``: a branch that gives
    up this iteration on purpose)? Only the arm of an ``if``/``try``/``match`` counts. The jump,
    else None."""
    p = parents(model, func).get(id(stmt))
    if p is None or not isinstance(p[0], (ast.If, ast.Try, getattr(ast, "TryStar", ast.Try), getattr(ast, "Match", ast.If))):
        return None  # only a branch gives up: a function or loop body ending in return/continue is the normal path
    owner, field, idx = p
    body = getattr(owner, field, None)
    if idx != -1 and isinstance(body, list):
        body = body[idx].body
    if not isinstance(body, list) or stmt not in body:
        return None
    last = body[-1]
    return last if isinstance(last, (ast.Break, ast.Continue, ast.Return, ast.Raise)) and last is not stmt else None



# A loop over runs, not over epochs: its body builds a fresh model or optimizer, or its target
# names a run (k-fold, seeds, sweeps). Shared by AMP302 and the project summary (a call made
# once per epoch from another module).
RUN_LOOP = lazy(r"fold|seed|run|trial|config|cfg|sweep|exp|task|model|lr\b|lrs\b|setting|param", re.IGNORECASE)
RUN_ITER = lazy(r"runs|seeds|folds|trials|configs|cfgs|experiments|repeats|sweep|grid", re.IGNORECASE)
MODEL_NAME = lazy(r"(?:^|_)(?:model|net|network|module)s?$", re.IGNORECASE)


def fresh_run_loop(loop_node, scope: dict, text) -> bool:
    """Does the body of the loop build a new optimizer or model, or is the loop itself over
    runs (its target names folds, seeds, configs)? ``text(node)``: a node's source text."""
    from amplint.model.filemodel import OPTIMIZER_NAME
    from amplint.model.names import qualify

    if isinstance(loop_node, (ast.For, ast.AsyncFor)):
        head = text(loop_node.target)
        if isinstance(loop_node.iter, (ast.Name, ast.Attribute)):
            head += " " + text(loop_node.iter)
        if RUN_LOOP.search(head) and not re.search(r"epoch", head, re.IGNORECASE):
            return True
        if RUN_ITER.search(text(loop_node.iter)):
            return True
    for n in ast.walk(loop_node):
        if isinstance(n, ast.Call):
            q = qualify(n.func, [scope]) or ""
            if q.startswith(("torch.optim.", "optim.")) and "lr_scheduler" not in q and "swa_utils" not in q:
                return True
            if q.endswith(".from_pretrained"):
                return True
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for x in ast.walk(t):
                    name = x.id if isinstance(x, ast.Name) else x.attr if isinstance(x, ast.Attribute) else ""
                    if name and ((OPTIMIZER_NAME.search(name) and "sched" not in name.lower()) or MODEL_NAME.search(name)):
                        return True
    return False


def names_in(nodes):
    """The names read in ``nodes``."""
    for n in nodes:
        for x in ast.walk(n):
            if isinstance(x, ast.Name):
                yield x.id


def one_pass_per_call(model, f, loop) -> bool:
    """Does ``loop`` run its body for one item per call: a loop over a dict that holds one
    optimizer (``_one_optimizer``), or one that skips every item but the one of this turn
    (``_picks_one``)?"""
    return _one_optimizer(model, f, loop) or _picks_one(loop)


def _one_optimizer(model, f, loop) -> bool:
    """Does the loop go over ``self.<attr>`` (``.keys()``/``.values()``/``.items()``, directly or
    through one local: ``names = self.optimizers.keys()``), a dict that the file fills with
    one literal key only (``self.optimizers["model"] = ...``)? Then it runs once."""
    it = getattr(loop.node, "iter", None)
    if isinstance(it, ast.Name):
        vals = [a.value for a in model.assigns.get(model.key_of_expr(it, f), ()) if a.func is f]
        it = vals[0] if len(vals) == 1 else None
    if isinstance(it, ast.ListComp) and len(it.generators) == 1:
        it = it.generators[0].iter
        if isinstance(it, ast.Name):
            vals = [a.value for a in model.assigns.get(model.key_of_expr(it, f), ()) if a.func is f]
            it = vals[0] if len(vals) == 1 else None
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("keys", "values", "items") and not it.args:
        it = it.func.value
    if not (isinstance(it, ast.Attribute) and isinstance(it.value, ast.Name) and it.value.id == f.self_name):
        return False
    attr, keys = it.attr, set()
    for n in ast.walk(model.tree):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)) and _is_attr(n.value, attr):
            if not (isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)):
                return False
            keys.add(n.slice.value)
        elif isinstance(n, ast.Assign) and any(_is_attr(t, attr) for t in n.targets):
            v = n.value
            if isinstance(v, ast.Dict) and v.keys:
                return False
            if not isinstance(v, (ast.Dict, ast.DictComp)):
                return False  # a list, a call: its length is unknown
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("update", "setdefault", "append", "extend") and _is_attr(n.func.value, attr):
            return False
    return len(keys) == 1


def _is_attr(node, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) and node.value.id == "self"


def _picks_one(loop) -> bool:
    """``for i, opt in enumerate(optimizers): if i != optim_idx: continue`` (the ``and``ed
    ``optim_idx is not None`` included): the body runs for the one optimizer of this turn."""
    body = getattr(loop.node, "body", [])
    first = body[0] if body else None
    if not (isinstance(first, ast.If) and len(first.body) == 1 and isinstance(first.body[0], ast.Continue) and not first.orelse):
        return False
    tests = first.test.values if isinstance(first.test, ast.BoolOp) and isinstance(first.test.op, ast.And) else [first.test]
    return any(
        isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq)
        and any(isinstance(x, ast.Name) and x.id in loop.targets for x in (t.left, *t.comparators))
        for t in tests
    )


def in_conditional_expression(p) -> bool:
    """The event ``p`` sits in an arm of a conditional expression (``a if c else b``)."""
    stmt = getattr(p, "stmt", None)
    if stmt is None:
        return False
    for n in ast.walk(stmt):
        if isinstance(n, ast.IfExp) and any(x is p.node for x in (*ast.walk(n.body), *ast.walk(n.orelse))):
            return True
    return False
