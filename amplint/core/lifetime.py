"""The life of a GradScaler object in one function (issue 31's value flow, for AMP302).

For one abstract scaler (a model key: a local, ``self.<attr>``, a module global) the analysis
follows which object the key holds, by allocation site, on entry to every statement of the
function's CFG, and what happened to that object's learned state since it was built. The
items, per statement in evaluation order:

* NEW: ``K = GradScaler(...)`` (the model's ``ctor`` assignments): K now holds a fresh object
  of that site;
* RESTORE: ``K.load_state_dict(...)``; a call handing K to a project function whose summary
  loads the state of that parameter (``restore(path, K)``, assigned back or not); or
  ``super().__init__()`` when the base ``__init__`` restores ``self.K`` (the project index says);
* BIND: any other assignment to K (``scaler = None``, ``self.scaler = make()``): another object,
  unless the value is a call handed K (``scaler = restore(path, scaler)`` gives K back);
* USE: a protocol event on K (``scale``/``step``/``update``/``unscale_``/backward), or a call
  that trains with K (a project function whose summary scales, steps or updates the parameter
  it gets K in; a method of this file that drives the same key).

On the arm of an ``if`` that tests K's existence (``if scaler is None:``, ``if not
hasattr(self, "scaler"):``) K holds no object: a lazy construction there replaces nothing.
The state is the set of ``(site, restore, used)`` bindings that may hold (``site`` None: what
K held on entry to the function, unknown). Nothing else changes a binding: the analysis
follows the key, not aliases, and code it cannot see is never evidence of a misuse.

Rules ask: which restored, still unused state reaches a construction (it is thrown away); is
the object built at a site ever restored later; which uses it reaches; and, through
``cfg.avoidable``, whether every pass of a loop through a use builds the object again.
"""

from __future__ import annotations

import ast

from amplint.core.cfg import CFG, of

USE_KINDS = ("scale", "step", "update", "unscale", "backward")


class Item:
    """One NEW / RESTORE / USE of the key in a statement (``x``: the model fact behind it)."""

    __slots__ = ("kind", "x", "seq", "stmt", "line")

    def __init__(self, kind, x, seq, stmt, line):
        self.kind, self.x, self.seq, self.stmt, self.line = kind, x, seq, stmt, line

    def __repr__(self) -> str:
        return f"{self.kind}@{self.line}"


class Lifetime:
    """The bindings of ``key`` on entry to each item of ``func``."""

    def __init__(self, model, func, key, cfg: CFG | None = None, base_restores: bool = True, unknown_uses: bool = False):
        """``unknown_uses``: a call handed K that does not resolve counts as a use (a rule that
        knows the file drives K itself); it never counts as a restore."""
        self.unknown_uses = unknown_uses
        self.model, self.func, self.key = model, func, key
        self.cfg = cfg if cfg is not None else of(func)
        self.items: dict[int, list[Item]] = {}
        self.restorers: dict[int, str] = {}  # id(super().__init__ call) -> the base __init__ that restores K
        self._collect(base_restores)
        self._missing = self._existence_arms()
        self.before: dict[int, frozenset] = {}  # id(item) -> bindings on entry to it
        self._solve()

    # ------------------------------------------------------------------ items
    def _add(self, kind, x, seq, stmt, node):
        if stmt is not None and id(stmt) in self.cfg.node_of:
            self.items.setdefault(id(stmt), []).append(Item(kind, x, seq, stmt, getattr(node, "lineno", 0)))

    def _collect(self, base_restores: bool) -> None:
        m, f, key = self.model, self.func, self.key
        for a in m.assigns.get(key, ()):
            if a.func is not f:
                continue
            if a.kind == "ctor":
                self._add("new", a, a.seq, a.stmt, a.node)
            elif not _gives_back(a, f, key):
                self._add("bind", a, a.seq, a.stmt, a.node)  # another object (``restore(path, K)`` gives K back)
        for e in f.events:
            if e.scaler == key and e.kind in USE_KINDS:
                self._add("use", e, e.seq, e.stmt, e.node)
        for mc in f.methods:
            if mc.called and mc.attr == "load_state_dict" and mc.receiver == key:
                self._add("restore", mc, mc.seq, mc.stmt, mc.node)
        for c in f.calls:
            effect = self._call_effect(c, base_restores)
            if effect is not None:
                self._add(effect, c, c.seq, c.stmt, c.node)
        for v in self.items.values():
            v.sort(key=lambda i: (i.kind in ("new", "bind"), i.seq))  # a statement's calls run before its store

    def _call_effect(self, c, base_restores: bool) -> str | None:
        m, key = self.model, self.key
        positions = [p for p, k in c.arg_keys if k == key]
        if positions:
            hit = m.project_callee(c)
            if hit is None:
                return "use" if self.unknown_uses else None
            _path, callee, facts = hit
            ops = set()
            for p in positions:
                ops |= facts.scaler_ops.get(callee.param_at(p) or "", set())
            if "load" in ops:
                return "restore"
            return "use" if ops & {"scale", "step", "update"} else None
        if key[0] == "A" and base_restores and _super_init(c.node) and self.func.name == "__init__" and self.func.cls is not None:
            index = m.index
            hit = index.base_init(m.path, self.func.cls.qualname) if hasattr(index, "base_init") else None
            if hit is not None and "load" in index.facts(*hit).self_ops.get(f"self.{key[-1]}", ()):
                self.restorers[id(c)] = hit[1].qualname
                return "restore"
            return None
        if key[0] == "A":
            g = m.resolve_callee(c)
            if g is not None and g is not self.func and any(e.scaler == key and e.kind in USE_KINDS for e in g.events):
                return "use"
        return None

    def _existence_arms(self) -> set[int]:
        """The CFG edges (if node, arm node) into an arm in which K holds no object."""
        names = _key_texts(self.model, self.func, self.key)
        out = set()
        for n in self.cfg.nodes:
            s = n.stmt
            if isinstance(s, ast.If) and id(s) in self.cfg.arms:
                present = _tests_presence(s.test, names, self.key)
                if present is not None:
                    then, other = self.cfg.arms[id(s)]
                    out.add((id(n), id(other) if present else id(then)))
        return out

    # ------------------------------------------------------------------ solving
    def _transfer(self, node, state: frozenset, record: bool) -> frozenset:
        for it in self.items.get(id(node.stmt), ()) if node.stmt is not None else ():
            if record:
                self.before[id(it)] = self.before.get(id(it), frozenset()) | state
            if it.kind in ("new", "bind"):
                state = frozenset(((it, None, False),))
            elif it.kind == "restore":
                state = frozenset((site, it, False) for site, _r, _u in state)
            else:
                state = frozenset((site, r, True) for site, r, _u in state)
        return state

    def _solve(self) -> None:
        cfg = self.cfg
        into: dict[int, frozenset] = {id(cfg.entry): frozenset(((None, None, False),))}
        work = [cfg.entry]
        while work:
            n = work.pop()
            out = self._transfer(n, into[id(n)], record=False)
            for s in n.succ:
                st = frozenset() if (id(n), id(s)) in self._missing else out
                old = into.get(id(s))
                new = st if old is None else old | st
                if new != old:
                    into[id(s)] = new
                    work.append(s)
        for n in cfg.nodes:
            if id(n) in into:
                self._transfer(n, into[id(n)], record=True)

    # ------------------------------------------------------------------ queries
    def of_kind(self, kind) -> list[Item]:
        return sorted((i for v in self.items.values() for i in v if i.kind == kind), key=lambda i: i.seq)

    def new_item(self, assign) -> Item | None:
        return next((i for i in self.of_kind("new") if i.x is assign), None)

    def discarded_restore(self, new: Item) -> Item | None:
        """The restore whose state may still be held when ``new`` builds a fresh object in its
        place, used on no path in between (the earliest such restore). A state some path used
        first (a loop that may also run zero times) is not reported: another phase may start."""
        held = self.before.get(id(new), ())
        used = {r for _site, r, u in held if u}
        hits = [r for _site, r, u in held if r is not None and not u and r not in used]
        return min(hits, key=lambda r: r.seq) if hits else None

    def restored_later(self, new: Item) -> bool:
        """Is the object built by ``new`` restored on some path after it?"""
        return any(site is new for r in self.of_kind("restore") for site, _r, _u in self.before.get(id(r), ()))

    def uses_of(self, new: Item) -> list[Item]:
        """The uses that the object built by ``new`` may reach."""
        return [u for u in self.of_kind("use") if any(site is new for site, _r, _u in self.before.get(id(u), ()))]


def _gives_back(a, f, key) -> bool:
    """Is the value stored a call handed K (``scaler = restore(path, scaler)``, also unpacked:
    ``model, scaler = restore(path, model, scaler)``)? Then K keeps its object."""
    v = a.stmt.value if isinstance(a.stmt, (ast.Assign, ast.AnnAssign)) else a.value
    return isinstance(v, ast.Call) and any(k == key for c in f.calls if c.node is v for _p, k in c.arg_keys)


def _super_init(node) -> bool:
    """``super().__init__(...)`` or ``Base.__init__(self, ...)``."""
    fn = node.func
    if not (isinstance(fn, ast.Attribute) and fn.attr == "__init__"):
        return False
    v = fn.value
    return (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super") or isinstance(v, (ast.Name, ast.Attribute))


def _key_texts(model, func, key) -> set[str]:
    if key[0] == "A":
        return {f"{func.self_name or 'self'}.{key[-1]}"}
    return {str(key[-1])}


def _tests_presence(test, names: set[str], key) -> bool | None:
    """True when ``test`` holds iff K holds an object (``scaler``, ``scaler is not None``,
    ``hasattr(self, "scaler")``), False for the negation, None when it is not such a test."""
    pol = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, pol = test.operand, not pol
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
        test, pol = test.left, pol if isinstance(test.ops[0], ast.IsNot) else not pol
    if isinstance(test, (ast.Name, ast.Attribute)):
        return pol if ast.unparse(test) in names else None
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr" and len(test.args) == 2 \
            and key[0] == "A" and isinstance(test.args[1], ast.Constant) and test.args[1].value == key[-1]:
        return pol
    return None
