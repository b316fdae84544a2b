"""The GradScaler protocol as a typestate, run over a function's CFG.

For each abstract scaler (a model key) the state on entry to every statement is the set of
its protocol events (``step()``, ``unscale_()``) that ran since the last ``update()`` on
**every** path here, plus the marker ``MORE`` when other events may have run too (the paths
disagree, or code we do not follow touched the scaler: a call handed it, a method of the
object we cannot see, a callee that may step or update it). ``CLEAR``, the empty set, holds at
function entry and after ``update()``; a call that may update leaves ``UNKNOWN`` (``{MORE}``).
The iteration is *open* when the set holds an event. No rule reports what ``MORE`` stands for.

States are kept per *assumption set*: the outcomes of the ``if`` tests that guard this
scaler's own events (``if use_amp: scaler.step(opt) else: opt.step()``), written as the
model's normalised test keys. Paths that assume both outcomes of one key are infeasible and
dropped; paths under the same assumptions meet, and the meet of two different states is
UNKNOWN. So ``Open`` under an assumption set holds on every path consistent with it (a "must"
answer, path-sensitive only where the scaler's own branches make it matter). Assumptions about
tests inside a loop are forgotten at its head (the test may change between iterations).
"""

from __future__ import annotations

import ast

from amplint.core.cfg import CFG, build
from amplint.model import amp_ish
from amplint.model.walker import _norm_test

CLEAR = frozenset()
MORE = "more"  # other events may have run (never an Event)
UNKNOWN = frozenset((MORE,))
MAX_ASSUMPTIONS = 16  # more assumption sets at one statement: everything there is unknown


class Open:
    """The open iteration of a state: the event an ``update()`` must still close (the last
    ``step()``/``unscale_()`` since the last update; an ``unscale_()`` after a ``step()`` keeps
    the step)."""

    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event

    @staticmethod
    def of(state):
        if not any(x is not MORE for x in state):
            return None
        last = None
        for e in sorted((x for x in state if x is not MORE), key=lambda x: x.seq):
            if not (last is not None and last.kind == "step" and e.kind == "unscale"):
                last = e
        return Open(last)

    def __eq__(self, other) -> bool:
        return isinstance(other, Open) and other.event is self.event

    def __hash__(self) -> int:
        return id(self.event)

    def __repr__(self) -> str:
        return f"Open({self.event.kind}@{self.event.node.lineno})"


def _meet(a, b):
    """What holds on both: the events both sets hold, and MORE unless they are the same."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return (a & b) | UNKNOWN


def _join(into: dict, other: dict) -> dict:
    out = dict(into)
    for k, v in other.items():
        out[k] = _meet(out.get(k), v)
    if len(out) > MAX_ASSUMPTIONS:
        return {frozenset(): UNKNOWN}  # (an assumption set is a frozenset of branch outcomes)
    return out


class ScalerStates:
    """The states of one scaler on entry to each statement of one function."""

    def __init__(self, model, func, key, cfg: CFG | None = None, unseen: str = "update"):
        """``unseen``: what a call we cannot follow is feared to do to the scaler: "update"
        (a question about open iterations) or "step" (a question about updates with no step)."""
        self.model = model
        self.func = func
        self.key = key
        self.unseen = unseen
        self.cfg = cfg if cfg is not None else build(func.node)
        self._effects = self._collect()
        self._guards = self._guarding_ifs()
        self.before = self._solve()

    def _collect(self) -> dict[int, list]:
        """Per statement, in order: the protocol events of this scaler and the calls that may
        drive it (they make the state unknown)."""
        m, f, key = self.model, self.func, self.key
        out: dict[int, list] = {}
        for e in f.events:
            if e.scaler == key and e.kind in ("step", "unscale", "update") and e.stmt is not None:
                out.setdefault(id(e.stmt), []).append((e.seq, e))
        for c in f.calls:
            if c.stmt is not None and _may_drive(m, c, key, self.unseen):
                out.setdefault(id(c.stmt), []).append((c.seq, None))
        for v in out.values():
            v.sort(key=lambda t: t[0])
        return out

    def _guarding_ifs(self) -> dict[int, tuple[str, bool]]:
        """The ``if`` statements with one of this scaler's events in an arm: id -> (key, pol)."""
        out = {}
        self._ifs = {}
        for n in self.cfg.nodes:
            s = n.stmt
            if isinstance(s, ast.If) and id(s) in self.cfg.arms:
                inner = {id(x) for x in ast.walk(s) if x is not s}
                if inner & self._effects.keys():
                    k, pol = _norm_test(s.test)
                    if k is not None:
                        out[id(s)] = (k, pol)
                        self._ifs[id(s)] = s
        return out

    def transfer(self, stmt, state):
        """The state after ``stmt``'s own protocol events."""
        for _seq, e in self._effects.get(id(stmt), ()):
            if e is None:
                state = UNKNOWN if self.unseen == "update" else state | UNKNOWN
            elif e.kind == "update":
                state = CLEAR if not e.ctx.in_finally else UNKNOWN
            else:
                state = state | {e}
        return state

    def _edge(self, n, succ, states: dict) -> dict:
        """Assume the outcome of a guarding ``if`` along its arm; drop infeasible sets."""
        g = self._guards.get(id(n.stmt)) if n.stmt is not None else None
        if g is not None:
            then, other = self.cfg.arms[id(n.stmt)]
            if succ is then or succ is other:
                k, pol = g
                if succ is other:
                    pol = not pol
                out = {}
                arm = 0 if succ is then else 1
                for a, st in states.items():
                    if (k, not pol) in {(x[0], x[1]) for x in a}:
                        continue
                    b = a | {(k, pol, id(n.stmt), arm)}
                    out[b] = _meet(out.get(b), st)
                return out
        if isinstance(succ.stmt, (ast.For, ast.AsyncFor, ast.While)):
            inside = {id(x) for x in ast.walk(succ.stmt)}
            out = {}
            for a, st in states.items():
                b = frozenset(x for x in a if x[2] not in inside)  # (key, pol, id(if), arm)
                out[b] = _meet(out.get(b), st)
            return out
        return states

    def _solve(self) -> dict[int, dict]:
        cfg = self.cfg
        start = {frozenset(): CLEAR}
        before: dict[int, dict] = {}
        after: dict[int, dict] = {cfg.entry.index: start}
        work = list(cfg.entry.succ)
        budget = 60 * max(1, len(cfg.nodes))
        while work and budget:
            budget -= 1
            n = work.pop()
            states: dict = {}
            for p in n.pred:
                if p.index in after:
                    states = _join(states, self._edge(p, n, after[p.index]))
            if not states:
                continue
            out = {a: self.transfer(n.stmt, st) for a, st in states.items()} if n.stmt is not None else states
            if before.get(n.index) == states and after.get(n.index) == out:
                continue
            before[n.index], after[n.index] = states, out
            work.extend(n.succ)
        if work:  # no fixpoint within the budget: nothing is known
            return {}
        return before

    def on_entry(self, stmt) -> dict:
        """Assumption set -> state on entry to ``stmt`` (empty when unreachable or unknown)."""
        n = self.cfg.node_of.get(id(stmt))
        return self.before.get(n.index, {}) if n is not None else {}

    def describe(self, stmt) -> list[str]:
        """The states on entry to ``stmt``, one line per assumption set (for ``explain``)."""
        return [f"{show_assumptions(a)}: {show(st)}" for a, st in sorted(self.on_entry(stmt).items(), key=lambda x: show_assumptions(x[0]))]

    def under_amp_switch(self, assumptions) -> bool:
        """Does the assumption set take the arm of an AMP switch (``if use_amp:``, ``if scaler is
        not None:``, ``if scaler.is_enabled():``, the scaler's own ``enabled=`` expression) that
        skips the update the other arm runs? That arm is the AMP-off path, where the scaler is
        disabled or absent and its calls are no-ops."""
        for k, _pol, i, arm in assumptions:
            if amp_switch(self.model, self.key, k):
                other = self._ifs[i].orelse if arm == 0 else self._ifs[i].body
                inner = {id(x) for st in other for x in ast.walk(st)}
                if any(e is not None and e.kind == "update" for sid in inner for _q, e in self._effects.get(sid, ())):
                    return True
        return False

    def open_on_entry(self, stmt):
        """The open iteration (``Open``) of an assumption set on entry to ``stmt`` that the
        statement's own events do not close (the earliest such event), else None."""
        hits = [
            o for a, st in self.on_entry(stmt).items()
            if (o := Open.of(st)) is not None and Open.of(self.transfer(stmt, st)) is not None and not self.under_amp_switch(a)
        ]
        return min(hits, key=lambda o: o.event.seq) if hits else None


def show(state) -> str:
    """A state for people: ``clear``, ``unknown``, or the open events (``step@12, unscale_@10``)."""
    if state == CLEAR:
        return "clear (no step since the last update)"
    names = [f"{'unscale_' if e.kind == 'unscale' else e.kind}@{e.node.lineno}" for e in sorted((x for x in state if x is not MORE), key=lambda x: x.seq)]
    if not names:
        return "unknown"
    return "open: " + ", ".join(names) + (" (and maybe more)" if MORE in state else "")


def show_assumptions(assumptions) -> str:
    """``if use_amp`` / ``if not clip`` for an assumption set, or ``every path``."""
    if not assumptions:
        return "every path"
    return ", ".join(("if " if pol else "if not ") + k for k, pol, _i, _a in sorted(assumptions, key=lambda x: (x[0], x[1])))


def amp_switch(model, key, test_key: str | None) -> bool:
    """Is a branch test (the model's normalised key) an AMP switch for the scaler ``key``?"""
    if not test_key:
        return False
    if amp_ish(test_key):
        return True
    enabled = enabled_text(model, key)
    return bool(enabled) and enabled in test_key


def enabled_text(model, key) -> str | None:
    """The source of the expression that enables the scaler (``enabled=use_amp``, or the test
    of ``GradScaler() if amp else None``), when it is not a constant."""
    for a in model.constructions(key):
        call = a.value
        if isinstance(call, ast.IfExp):
            return model.text(call.test)
        if isinstance(call, ast.Call):
            for kw in call.keywords:
                if kw.arg == "enabled" and not isinstance(kw.value, ast.Constant):
                    return model.text(kw.value)
    return None


def _may_drive(model, call, key, unseen: str) -> bool:
    """Could this call do ``unseen`` ("update" or "step") to the scaler ``key`` out of our sight?
    A function of this file is asked what it does to the parameter it is handed the scaler in
    (and to the scaler itself); an unresolved call handed the scaler may do anything, and an
    unknown method of the object holding it may update it."""
    callee = model.resolve_callee(call)
    if callee is None:  # (an unknown method of the object is feared to update it, not to step it)
        return any(k == key for _p, k in call.arg_keys) or (unseen == "update" and key[0] == "A" and model.calls_self_unknown(call))
    if not callee.walked:
        return model.mentions(callee, "update" if unseen == "update" else "step(")
    keys = [key]
    for pos, k in call.arg_keys:
        if k == key:
            name = model._param_for(callee, pos)
            if name is None:
                return True  # handed on through *args/**kwargs
            keys.append(("L", callee.fid, name))
    if unseen == "update":
        return any(model.may_update(callee, k) for k in keys)
    return any(e.kind == "step" and e.scaler in keys for e in callee.events)
