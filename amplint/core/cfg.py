"""A statement-level control-flow graph of one function body (stdlib ``ast`` only).

Every statement is a node; a compound statement's node stands for its header (the ``if`` test,
the loop's iteration step, the ``with`` items). Edges follow Python's semantics closely enough
for "on every path" questions: ``if``/``match`` arms, loop bodies with back edges and ``else``,
``break``/``continue`` to their loop, ``return``/``raise`` to the exit (through the ``finally``
bodies on the way), and each ``except`` handler entered from the ``try`` header and from every
statement of its body. Nested ``def``/``class`` statements are single nodes.
"""

from __future__ import annotations

import ast

from amplint.model.walker import _norm_test

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


class Node:
    __slots__ = ("stmt", "succ", "pred", "index")

    def __init__(self, stmt, index: int):
        self.stmt = stmt  # None for the entry and exit nodes
        self.succ: list[Node] = []
        self.pred: list[Node] = []
        self.index = index

    def __repr__(self) -> str:
        return f"Node({type(self.stmt).__name__ if self.stmt is not None else '-'}@{getattr(self.stmt, 'lineno', '-')})"


class CFG:
    """``entry`` and ``exit`` are synthetic; ``node_of[id(stmt)]`` is the node of a statement;
    ``loop_of[id(stmt)]`` is the innermost loop statement around it (None at the top)."""

    def __init__(self, body: list[ast.stmt]):
        self.nodes: list[Node] = []
        self.node_of: dict[int, Node] = {}
        self.loop_of: dict[int, ast.stmt | None] = {}
        self.arms: dict[int, tuple[Node, Node]] = {}  # id(if statement) -> (then node, else node)
        self._under: dict[int, frozenset[int]] = {}
        self.entry = self._new(None)
        self.exit = self._new(None)
        self._finally: list[list[ast.stmt]] = []  # open finally bodies (innermost last)
        first = self._block(body, self.exit, loop=None, brk=None, cont=None, handlers=())
        self._edge(self.entry, first)

    # ------------------------------------------------------------------ building
    def _new(self, stmt) -> Node:
        n = Node(stmt, len(self.nodes))
        self.nodes.append(n)
        return n

    @staticmethod
    def _edge(a: Node, b: Node) -> None:
        if b not in a.succ:
            a.succ.append(b)
            b.pred.append(a)

    def _block(self, body, follow: Node, loop, brk, cont, handlers) -> Node:
        """Build ``body`` so that falling off its end goes to ``follow``; return its first node."""
        nxt = follow
        for s in reversed(body):
            nxt = self._stmt(s, nxt, loop, brk, cont, handlers)
        return nxt

    def _stmt(self, s, follow: Node, loop, brk, cont, handlers) -> Node:
        n = self._new(s)
        self.node_of[id(s)] = n
        self.loop_of[id(s)] = loop
        for h in handlers:  # any statement of a try body may raise into its handlers
            self._edge(n, h)
        if isinstance(s, ast.If):
            then = self._block(s.body, follow, loop, brk, cont, handlers)
            other = self._block(s.orelse, follow, loop, brk, cont, handlers) if s.orelse else follow
            self._edge(n, then)
            self._edge(n, other)
            self.arms[id(s)] = (then, other)
        elif isinstance(s, _LOOPS):
            after = self._block(s.orelse, follow, loop, brk, cont, handlers) if s.orelse else follow
            self._edge(n, self._block(s.body, n, s, follow, n, handlers))
            if not (isinstance(s, ast.While) and isinstance(s.test, ast.Constant) and s.test.value):
                self._edge(n, after)  # `while True:` leaves only through break/return/raise
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            self._edge(n, self._block(s.body, follow, loop, brk, cont, handlers))
        elif isinstance(s, ast.Match):
            for case in s.cases:
                self._edge(n, self._block(case.body, follow, loop, brk, cont, handlers))
            self._edge(n, follow)
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._try(s, n, follow, loop, brk, cont, handlers)
        elif isinstance(s, ast.Break):
            self._edge(n, self._through_finally(brk or self.exit))
        elif isinstance(s, ast.Continue):
            self._edge(n, self._through_finally(cont or self.exit))
        elif isinstance(s, (ast.Return, ast.Raise)):
            self._edge(n, self._through_finally(self.exit) if not handlers or isinstance(s, ast.Return) else handlers[0])
        else:
            self._edge(n, follow)
        return n

    def _try(self, s, n: Node, follow: Node, loop, brk, cont, handlers) -> None:
        after = follow
        if s.finalbody:
            after = self._block(s.finalbody, follow, loop, brk, cont, handlers)
            self._finally.append(s.finalbody)
        hs = [self._block(h.body, after, loop, brk, cont, handlers) for h in s.handlers]
        else_first = self._block(s.orelse, after, loop, brk, cont, handlers) if s.orelse else after
        self._edge(n, self._block(s.body, else_first, loop, brk, cont, tuple(hs) or handlers))
        for h in hs:
            self._edge(n, h)
        if s.finalbody:
            self._finally.pop()

    def _through_finally(self, target: Node) -> Node:
        """A jump out of open ``try`` bodies runs their ``finally`` first: the jump goes to a
        copy-free stand-in, the innermost finally body, whose end falls through to its own
        follower (an over-approximation that only adds paths)."""
        return target if not self._finally else self._finally_entry(target)

    def _finally_entry(self, target: Node) -> Node:
        body = self._finally[-1]
        first = self.node_of.get(id(body[0]))
        if first is None:
            return target
        last = self.node_of.get(id(body[-1]))
        if last is not None and not isinstance(last.stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            self._edge(last, target)
        return first

    # ------------------------------------------------------------------ queries
    def under(self, stmt) -> frozenset[int]:
        """The ids of every AST node inside ``stmt`` (``stmt`` itself included), computed once:
        the analyses ask it at each edge into a loop head, and a long loop body walked per
        edge cost one 3,956-line file 35 s."""
        out = self._under.get(id(stmt))
        if out is None:
            out = self._under[id(stmt)] = frozenset(id(x) for x in ast.walk(stmt))
        return out

    def loops_around(self, stmt) -> list[ast.stmt]:
        """The loops around ``stmt``, innermost first."""
        out = []
        loop = self.loop_of.get(id(stmt))
        while loop is not None:
            out.append(loop)
            loop = self.loop_of.get(id(loop))
        return out


def build(func_node) -> CFG:
    """The CFG of a function (or module) body."""
    body = func_node.body if isinstance(func_node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)) else [func_node]
    return CFG(body)


def of(func) -> CFG:
    """The CFG of a model function (``Func``), built once: the analyses and rules that ask for
    one function's graph share it (it is never changed after it is built)."""
    g = func.__dict__.get("_cfg")
    if g is None:
        g = func._cfg = build(func.node)
    return g


def cycle_through(cfg: CFG, stmt, loop) -> set[int] | None:
    """The ids of the statements on some path from ``stmt`` back to itself that stays inside
    ``loop`` (a loop statement around it): what runs between one pass's ``stmt`` and the next
    one's. None when no such path exists (every pass leaves the loop after it)."""
    start = cfg.node_of.get(id(stmt))
    if start is None:
        return None

    def inside(n) -> bool:
        return n.stmt is not None and (n.stmt is loop or loop in cfg.loops_around(n.stmt))

    def closure(step) -> set:
        seen, work = set(), [start]
        while work:
            n = work.pop()
            for m in step(n):
                if m not in seen and inside(m):
                    seen.add(m)
                    work.append(m)
        return seen

    fwd = closure(lambda n: n.succ)
    if start not in fwd:
        return None
    return {id(n.stmt) for n in fwd & closure(lambda n: n.pred)}


def varies(cfg: CFG, loop, test) -> bool:
    """May ``test`` change between passes of ``loop``: it calls something, or names a variable
    or attribute the loop assigns (its target included)? Answered once per (loop, test)."""
    memo = cfg.__dict__.setdefault("_varies", {})
    hit = memo.get((id(loop), id(test)))
    if hit is None:
        stored = cfg.__dict__.setdefault("_stored", {})
        names = stored.get(id(loop))
        if names is None:
            names = stored[id(loop)] = {ast.unparse(x) for x in ast.walk(loop) if isinstance(getattr(x, "ctx", None), ast.Store)}
        hit = memo[(id(loop), id(test))] = any(
            isinstance(x, ast.Call) or (isinstance(x, (ast.Name, ast.Attribute)) and ast.unparse(x) in names) for x in ast.walk(test)
        )
    return hit


MAX_PATH_STATES = 20000


def avoidable(cfg: CFG, start, target, avoid, loop=None) -> bool:
    """Is there a path from ``start`` (a statement, left through its successors; None: the
    function's entry) to ``target`` that never passes the statement ``avoid``, stays inside
    ``loop`` when one is given, and takes no two arms of ``if`` tests with the same normalised
    test that contradict each other (``if use_amp:`` ... ``if use_amp:``)? A test that may change
    between passes (``varies``) is forgotten at the head of its loop. When the search grows
    past ``MAX_PATH_STATES`` the answer is True: a rule reporting "every path passes it" stays
    silent on what it could not check."""
    begin = cfg.entry if start is None else cfg.node_of.get(id(start))
    goal, bar = cfg.node_of.get(id(target)), cfg.node_of.get(id(avoid))
    if begin is None or goal is None:
        return True
    tests = cfg.__dict__.setdefault("_tests", {})

    def inside(n) -> bool:
        return loop is None or (n.stmt is not None and (n.stmt is loop or loop in cfg.loops_around(n.stmt)))

    seen: set = set()
    work = [(begin, frozenset())]
    while work:
        n, assumed = work.pop()
        arms = cfg.arms.get(id(n.stmt)) if isinstance(n.stmt, ast.If) else None
        if arms is not None and id(n.stmt) not in tests:
            tests[id(n.stmt)] = _norm_test(n.stmt.test)
        for s in n.succ:
            if s is bar or not inside(s):
                continue
            here = assumed
            if arms is not None and tests[id(n.stmt)][0] is not None:
                k, pol = tests[id(n.stmt)]
                pol = pol if s is arms[0] else not pol
                if arms[0] is arms[1]:
                    pol = None
                if pol is not None:
                    if any(t == k and p != pol for t, p, _x in here):
                        continue
                    here = here | {(k, pol, n.stmt.test)}
            if s is goal:
                return True
            if isinstance(s.stmt, _LOOPS) and here:
                here = frozenset(a for a in here if not varies(cfg, s.stmt, a[2]))
            state = (s, here)
            if state not in seen:
                if len(seen) > MAX_PATH_STATES:
                    return True
                seen.add(state)
                work.append(state)
    return False
