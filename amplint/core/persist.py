"""What a checkpoint holds where it is written or returned, and whether a run can resume from
it (issue 31's persistence queries, AMP301).

``held(model, func, stmt, value, scalers)`` answers, for the value a saver is handed
(``torch.save(x, path)``, a helper that saves its parameter, a method's ``return``), which
abstract objects' state reaches it:

- an optimizer's: ``x.state_dict()`` (or a helper named for it given ``x`` alone) where the
  model types ``x`` as an optimizer;
- the scaler's: the state or the object itself (a pickled GradScaler keeps its state) of one of
  ``scalers`` or of any key the model types as a GradScaler;
- and, since unknown must stay silent, a value it cannot resolve is taken to be the scaler's
  when it, or the key it is stored under, names one (``"scaler": None``, ``amp_state``).

It follows containers: ``{...}``, ``dict(k=v)``, lists, tuples and conditional values; a
local as the container flow (``containers.DictFlow``) says it holds on entry to ``stmt``,
nested dicts and ``state_dict()`` aliases included; and the dict a project function returns
(``make_state(optimizer, epoch)``, called here or assigned to a local before), by its summary,
whose parameters are typed by the arguments this call hands it. A value handed to code we
cannot read makes the flow Top there: ``held`` answers None and no rule reports it.

``resumable(model, call)`` says whether training can resume from the checkpoint a call writes:
not an export written once after training in a project (or a script's import closure, by what
its code can reach: ``ProjectIndex.script_restores``) that never restores an optimizer state,
nor a class's own save whose own load restores no optimizer.
"""

from __future__ import annotations

import ast
import re

from amplint.lazyre import lazy
from amplint.core.containers import Contents, DictFlow
from amplint.model.names import literal_dict, qualify, state_owner

_NAMES_SCALER = lazy(r"scale", re.IGNORECASE)
_DEPTH = 4  # nested containers followed


class Held:
    """What one checkpoint holds: ``optimizer`` (some optimizer's state), ``own_optimizer``
    (``self.<optimizer>``'s, for a method of the object), ``scaler`` (the scaler's, or
    something unresolved named for it) and ``identity`` (one checkpoint however many saves
    write it: the literal, the local dict's origin or the helper call)."""

    __slots__ = ("optimizer", "own_optimizer", "scaler", "identity")

    def __init__(self, identity):
        self.optimizer = self.own_optimizer = self.scaler = False
        self.identity = identity

    def __repr__(self) -> str:
        return f"Held(optimizer={self.optimizer}, own={self.own_optimizer}, scaler={self.scaler})"


def flow(model, func) -> DictFlow:
    """The container flow of ``func``, once per model."""
    memo = model.__dict__.setdefault("_persist_flows", {})
    hit = memo.get(id(func))
    if hit is None:
        hit = memo[id(func)] = DictFlow(model, func)
    return hit


def held(model, func, stmt, value, scalers=()) -> Held | None:
    """What ``value`` (an expression of ``func``'s statement ``stmt``) holds; None when it is
    not a checkpoint we can read (not a state, container or known helper's dict, or Top)."""
    return _Reader(model, func, stmt, scalers).top(value)


class _Reader:
    def __init__(self, model, func, stmt, scalers):
        self.model, self.func, self.stmt, self.scalers = model, func, stmt, set(scalers)

    def top(self, v) -> Held | None:
        if isinstance(v, ast.Name):
            prior = self._helper_assigned(v)
            if prior is not None:
                return prior
            c = self._contents(v)
            if c is not None:
                h = Held(c.identity)
                self._entries(h, c, 0)
                return h
            alias = flow(self.model, self.func).alias(self.stmt, v.id) if self.stmt is not None else None
            if not alias:
                return None
            h = Held(id(alias[0]))
            for x in alias:
                self._leaf(h, x, "", 1)
            return h
        if isinstance(v, ast.Call) and literal_dict(v) is None:
            h = self._helper_call(v)  # the dict a project function returns (``self.state_dict()`` too)
            if h is not None or state_owner(v) is None:
                return h
        d = literal_dict(v)
        if d is None and state_owner(v) is None:
            return None
        h = Held(id(d) if d is not None else id(v))
        self._leaf(h, d if d is not None else v, "", 0)
        return h

    # ------------------------------------------------------------------ containers
    def _contents(self, name: ast.Name) -> Contents | None:
        if self.stmt is None:
            return None
        return flow(self.model, self.func).contents(self.stmt, name.id)

    def _entries(self, h: Held, c: Contents, depth: int) -> None:
        if _NAMES_SCALER.search(c.text) and not all(self._typed(x) for x in c.values):
            h.scaler = True  # an entry named for the scaler that we cannot type
        for x in c.values:
            self._leaf(h, x, "", depth + 1)

    def _leaf(self, h: Held, v, key: str, depth: int) -> None:
        if v is None or depth > _DEPTH:
            return
        d = literal_dict(v)
        if d is not None:
            for k, x in zip(d.keys, d.values):
                self._leaf(h, x, self.model.text(k) if k is not None else "", depth + 1)
            return
        if isinstance(v, (ast.List, ast.Tuple, ast.Set)):
            for x in v.elts:
                self._leaf(h, x, key, depth + 1)
            return
        if isinstance(v, ast.IfExp):
            self._leaf(h, v.body, key, depth + 1)
            self._leaf(h, v.orelse, key, depth + 1)
            return
        if isinstance(v, ast.Starred):
            self._leaf(h, v.value, key, depth + 1)
            return
        base = state_owner(v)
        if base is not None and self.model.is_optimizer(base, self.func):
            h.optimizer = True
            me = self.func.self_name
            if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and me and base.value.id == me:
                h.own_optimizer = True
            return
        if base is not None and self._scaler(base):
            h.scaler = True
            return
        if isinstance(v, ast.Name):
            if self._scaler(v):
                h.scaler = True  # the GradScaler object itself, pickled with its state
                return
            alias = flow(self.model, self.func).alias(self.stmt, v.id) if self.stmt is not None else None
            if alias:
                for x in alias:
                    self._leaf(h, x, key, depth + 1)
                return
            c = self._contents(v)
            if c is not None:
                self._entries(h, c, depth)
                return
        elif isinstance(v, ast.Attribute) and self._scaler(v):
            h.scaler = True
            return
        if _NAMES_SCALER.search(key) or _NAMES_SCALER.search(self.model.text(v)):
            h.scaler = True  # unresolved, named for the scaler: taken to be it

    def _typed(self, v) -> bool:
        base = state_owner(v)
        return base is not None and (self.model.is_optimizer(base, self.func) or self._scaler(base))

    def _scaler(self, node) -> bool:
        key = self.model.key_of_expr(node, self.func)
        return key is not None and (key in self.scalers or self.model.is_scaler(key))

    # ------------------------------------------------------------------ helpers' dicts
    def _helper_assigned(self, name: ast.Name) -> Held | None:
        """``state = make_state(...)`` before the save, in this function."""
        model, f = self.model, self.func
        key = model.key_of_expr(name, f)
        site = next((c for c in f.calls if c.stmt is self.stmt), None)
        seq = site.seq if site is not None else None
        prior = [x for x in model.assigns.get(key, ()) if x.func is f and (seq is None or x.seq < seq)]
        a = prior[-1].value if prior else None
        return self._helper_call(a) if isinstance(a, ast.Call) and literal_dict(a) is None else None

    def _helper_call(self, call: ast.Call) -> Held | None:
        """The dict a project function returns, its parameters typed by this call's arguments."""
        model, f = self.model, self.func
        site = next((x for x in f.calls if x.node is call), None)
        hit = model.project_callee(site) if site is not None else None
        fact = hit[2].returns_state if hit is not None else None
        if fact is None:
            return None
        callee = hit[1]
        h = Held(id(call))
        h.scaler = fact.has_scaler
        own = isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and call.func.value.id == f.self_name
        if own and any(p.startswith("self.") for p in fact.opt_params):
            h.optimizer = h.own_optimizer = True
        given = set(fact.opt_params) | set(fact.state_params)
        for pos, a in [*enumerate(call.args), *((kw.arg, kw.value) for kw in call.keywords if kw.arg)]:
            p = callee.param_at(pos)
            if p is None or p not in given or not isinstance(a, (ast.Name, ast.Attribute)):
                continue
            if model.is_optimizer(a, f):
                h.optimizer = True
            elif self._scaler(a) or p in fact.scaler_params:
                h.scaler = True
        return h if h.optimizer or h.scaler else None


def resumable(model, c) -> bool:
    """Can training resume from this checkpoint? Not when it is written once, after the
    training loop of the same function (no loop around the save; the loops that scale losses
    end before it), and no file of the project restores an optimizer state: that is an export
    of the trained model. A periodic save, a save helper or method, or a project that
    resumes (known only in project mode; a file alone is taken to resume) is a training
    checkpoint."""
    if getattr(model.index, "restores_optimizer", None) is False:
        return False  # nothing in the project resumes from an optimizer state
    if script_never_resumes(model):
        return False
    if _own_load_drops_optimizer(model, c.func):
        return False
    if c.ctx.loops:
        return True
    f = c.func
    train_loops = {id(lp.node): lp.node for e in f.events if e.kind in ("backward", "step") for lp in e.loops}
    if not train_loops or not all((n.end_lineno or n.lineno) < c.node.lineno for n in train_loops.values()):
        return True
    return getattr(model.index, "restores_optimizer", None) is not False


def script_never_resumes(model) -> bool:
    """The file is a script (a notebook, or a module no other project file names), and
    neither it nor any project module it imports may restore an optimizer state: a run of it
    never resumes, whatever other scripts of the project do (project mode only)."""
    query = getattr(model.index, "script_restores", None)
    return query is not None and query(model.path) is False


def _own_load_drops_optimizer(model, f) -> bool:
    """The save is a method of a class that reads its checkpoints back itself (a method
    calling ``torch.load``), and nothing in the file may restore an optimizer state (no call
    of a function named ``...load...`` whose text names ``opt``: ``optimizer.load_state_dict(...)``,
    ``self._load_weight(optimizer, ...)``, ``maybe_load_optimizer(...)``; a comment is not a
    call): the class's own load is the way back, and it does not resume training (tez's
    ``Model.save``/``Model.load``)."""
    cls = f.cls
    while cls is None and f.parent is not None:
        f = f.parent
        cls = f.cls
    if cls is None or not isinstance(cls.node, ast.ClassDef):
        return False
    if _may_load_optimizer(model):
        return False
    for m in cls.node.body:
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(m):
                if isinstance(n, ast.Call) and qualify(n.func, [model.module_scope]) == "torch.load":
                    return True
    return False


def _may_load_optimizer(model) -> bool:
    for g in model.funcs:
        for c in g.calls:
            fn = c.node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if "load" in name.lower() and "opt" in model.text(c.node).lower():
                return True
    return False
