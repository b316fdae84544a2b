"""The GradScaler protocol as a typestate, run over a function's CFG.

For each abstract scaler (a model key) the state on entry to every statement is one of:

* ``CLEAR``: no scaler iteration is open (function entry, or after ``update()``);
* ``Open(event)``: the last protocol event was ``event``, a ``step()`` or ``unscale_()`` that an
  ``update()`` must still close;
* ``UNKNOWN``: the paths disagree, or code we do not follow (a call handed the scaler, a method
  of the object we cannot see, a callee that may update) touched it. No rule reports UNKNOWN.

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
from amplint.model.walker import _norm_test

CLEAR = "clear"
UNKNOWN = "unknown"
MAX_ASSUMPTIONS = 16  # more assumption sets at one statement: everything there is unknown


class Open:
    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event

    def __eq__(self, other) -> bool:
        return isinstance(other, Open) and other.event is self.event

    def __hash__(self) -> int:
        return id(self.event)

    def __repr__(self) -> str:
        return f"Open({self.event.kind}@{self.event.node.lineno})"


def _meet(a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    return UNKNOWN


def _join(into: dict, other: dict) -> dict:
    out = dict(into)
    for k, v in other.items():
        out[k] = _meet(out.get(k), v)
    if len(out) > MAX_ASSUMPTIONS:
        return {frozenset(): UNKNOWN}
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
        for n in self.cfg.nodes:
            s = n.stmt
            if isinstance(s, ast.If) and id(s) in self.cfg.arms:
                inner = {id(x) for x in ast.walk(s) if x is not s}
                if inner & self._effects.keys():
                    k, pol = _norm_test(s.test)
                    if k is not None:
                        out[id(s)] = (k, pol)
        return out

    def transfer(self, stmt, state):
        """The state after ``stmt``'s own protocol events."""
        for _seq, e in self._effects.get(id(stmt), ()):
            if e is None:
                state = UNKNOWN
            elif e.kind == "update":
                state = CLEAR if not e.ctx.in_finally else UNKNOWN
            else:
                keep = isinstance(state, Open) and state.event.kind == "step" and e.kind == "unscale"
                state = state if keep else Open(e)
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
                for a, st in states.items():
                    if (k, not pol) in {(x, y) for x, y, _i in a}:
                        continue
                    b = a | {(k, pol, id(n.stmt))}
                    out[b] = _meet(out.get(b), st)
                return out
        if isinstance(succ.stmt, (ast.For, ast.AsyncFor, ast.While)):
            inside = {id(x) for x in ast.walk(succ.stmt)}
            out = {}
            for a, st in states.items():
                b = frozenset(x for x in a if x[2] not in inside)
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

    def open_on_entry(self, stmt):
        """The ``Open`` state of an assumption set on entry to ``stmt`` that the statement's own
        events do not close (the earliest such event), else None."""
        hits = [st for st in self.on_entry(stmt).values() if isinstance(st, Open) and isinstance(self.transfer(stmt, st), Open)]
        return min(hits, key=lambda st: st.event.seq) if hits else None


def _may_drive(model, call, key, unseen: str) -> bool:
    """Could this call do ``unseen`` ("update" or "step") to the scaler ``key`` out of our sight?"""
    if any(k == key for _p, k in call.arg_keys):
        return True  # a helper that receives the scaler
    callee = model.resolve_callee(call)
    if unseen == "step":  # a project function that steps this scaler
        return callee is not None and (
            any(e.kind == "step" and e.scaler == key for e in callee.events) if callee.walked else model.mentions(callee, "step("))
    if callee is not None:
        return model.may_update(callee, key) if callee.walked else model.mentions(callee, "update")
    return key[0] == "A" and model.calls_self_unknown(call)
