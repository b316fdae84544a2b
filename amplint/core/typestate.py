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

from amplint.core.cfg import CFG, of
from amplint.model import Event, amp_ish
from amplint.model.walker import _norm_test
from amplint.model.names import SCALER_NAME

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
        self.cfg = cfg if cfg is not None else of(func)
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
            if c.stmt is not None and may_drive(m, c, key, self.unseen):
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
                if any(i in self._effects for i in self.cfg.under(s) if i != id(s)):
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
            inside = self.cfg.under(succ.stmt)
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


def skipped_step(states: ScalerStates, u):
    """(step, guards) when the update ``u`` runs, under some outcome of the step's own branch
    tests, with no step or ``unscale_`` since the last update (CLEAR on every path consistent
    with those outcomes), while under another the step precedes it: ``guards`` are the branch
    literals that condition the step and not the update. Else None."""
    at = states.on_entry(u.stmt)
    steps = sorted({o.event for v in at.values() if (o := Open.of(v)) is not None and o.event.kind == "step"}, key=lambda e: e.seq)
    if not steps or CLEAR not in at.values():
        return None
    s = steps[-1]
    g = guard_lits(s, u)
    if not g or _per_item(s, g, u):
        return None
    return s, g


def _per_item(step, lits, u) -> bool:
    """The step's condition reads the variable of a loop the update is not in
    (``for key in self.optimizers: if names and key not in names: continue`` or
    ``if self.optimizer_types[key] == "adam": scaler.step(...)``): it may hold on some
    items and not others, and whether any item steps is unknown."""
    groups = {lit.group for lit in lits}
    for lp in step.ctx.loops:
        if lp in u.ctx.loops or not lp.targets:
            continue
        for n in ast.walk(lp.node):
            if isinstance(n, ast.If) and id(n) in groups:
                if any(isinstance(x, ast.Name) and x.id in lp.targets for x in ast.walk(n.test)):
                    return True
    return False


def accumulation_guard(lit) -> bool:
    k = (lit.key or "").lower()
    return "%" in k or "accum" in k or "sync_grad" in k


def guard_lits(s, u) -> list:
    """The branch literals that condition ``s`` but not ``u`` (a literal with the same test
    and polarity on ``u``, from another ``if`` with the same condition, guards both)."""
    out = []
    for lit in s.ctx.lits:
        if lit in u.ctx.lits:
            continue
        if lit.key is not None and any(x.key == lit.key and x.pol == lit.pol for x in u.ctx.lits):
            continue
        out.append(lit)
    return out



def guard_if(model, f, e, lits):
    """The ``if`` statement whose body holds the event ``e``'s statement directly, when the
    guard ``lits`` (``guard_lits``) is exactly that one ``if``'s true arm; else None."""
    from amplint.model.queries_extra import parents

    if len(lits) != 1 or lits[0].arm != 0:
        return None
    p = parents(model, f).get(id(e.stmt))
    if p is None:
        return None
    owner, field, _i = p
    if isinstance(owner, ast.If) and field == "body" and id(owner) == lits[0].group:
        return owner
    return None

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


def may_drive(model, call, key, unseen: str) -> bool:
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



def helper_steps(model):
    """Step events at calls: a call in a loop to a helper that steps the scaler it is handed and
    never updates it (``step(scaler, opt)``; its summary when in another module) is a step of
    that scaler there (``extra["helper"]`` names the callee)."""
    for f in model.funcs:
        for c in f.calls:
            if not c.ctx.loops:
                continue
            callee = model.resolve_callee(c)
            hit = model.project_callee(c) if callee is None and c.arg_keys else None
            if (callee is None or not callee.walked) and hit is None:
                continue
            for pos, key in c.arg_keys:
                if not model.is_scaler(key):
                    continue
                if hit is not None:  # a helper in another module: its summary says what it does
                    ops = hit[2].scaler_ops.get(hit[1].param_at(pos) or "", set())
                    if "step" not in ops or ops & {"update", "update_value"}:
                        continue
                else:
                    pname = model._param_for(callee, pos)
                    if pname is None:
                        continue
                    pkey = ("L", callee.fid, pname)
                    if not any(e.kind == "step" and e.scaler == pkey for e in callee.events) or model.may_update(callee, pkey):
                        continue
                yield Event("step", c.node, c.stmt, c.seq, f, c.ctx, scaler=key, extra={"helper": model.text(c.node.func)})


def scalers_sharing_an_optimizer(f) -> list | None:
    """The scaler keys of ``f`` that drive one optimizer in one iteration, when there are
    several: one optimizer stepped by several scalers on paths that co-occur, or several
    scalers scaling co-occurring losses while one optimizer is stepped in all; else None."""
    steps: dict[str, list] = {}
    scalers_scaling = {}
    for e in f.events:
        if e.kind == "step" and e.optimizer:
            steps.setdefault(e.optimizer, []).append(e)
        elif e.kind == "backward" and e.scaled:
            scalers_scaling.setdefault(e.scaler, e)
    group = None
    # (a) one optimizer stepped by several scalers in co-occurring paths
    for evs in steps.values():
        keys = []
        for e in evs:
            if e.scaler not in keys and all(e.co_occurs(o) for o in evs if o.scaler != e.scaler):
                keys.append(e.scaler)
        if len(keys) >= 2:
            group = keys
            break
    # (b) several scalers scale losses, but one optimizer is stepped in total
    if group is None and len(scalers_scaling) >= 2:
        evs = list(scalers_scaling.values())
        if all(a.co_occurs(b) for a in evs for b in evs) and len(steps) == 1:
            group = list(scalers_scaling)
    return group


def may_update_within(model, f, node, key) -> bool:
    """May a call of ``f`` inside ``node``'s lines (a loop) update the scaler ``key`` out of
    our sight (``may_drive``)?"""
    lo, hi = node.lineno, node.end_lineno or node.lineno
    return any(lo <= c.node.lineno <= hi and may_drive(model, c, key, "update") for c in f.calls)


def touched_between(model, f, key, lo: int, hi: int) -> bool:
    """Does anything of ``f`` strictly between the sequence numbers ``lo`` and ``hi`` use the
    scaler ``key``, or may it (an event or method of it, a call handed it, a callee we cannot
    read or one that may update it, an unknown method of the object holding it, a bare use)?
    A fix that moves a scaler call across that stretch is safe only when nothing does."""
    if any(lo < e.seq < hi and e.scaler == key for e in f.events):
        return True
    if any(lo < m.seq < hi and m.receiver == key for m in f.methods):
        return True
    for c in f.calls:
        if not lo < c.seq < hi:
            continue
        if any(k == key for _p, k in c.arg_keys):
            return True
        callee = model.resolve_callee(c)
        if callee is not None and (not callee.walked or model.may_update(callee, key)):
            return True
        if callee is None and key[0] == "A" and model.calls_self_unknown(c):
            return True
    return any(lo < seq < hi and k == key for k, _n, _c, seq in f.bare_uses)

# ---------------------------------------------------------------------------------------------
# Updates that close an iteration too early: which ``update()`` calls reach a statement.

_KILLS = ("backward", "framework_backward")  # a backward: the gradients of a new iteration
# Methods that never run a backward, whatever object they are called on (a scheduler's or an
# optimizer's ``step()``, a progress bar's or an EMA's ``update()``, logging, tensor reads).
_HARMLESS_METHODS = frozenset((
    "zero_grad", "step", "update", "item", "detach", "cpu", "cuda", "to", "numpy", "tolist", "append", "extend",
    "add_scalar", "log", "info", "debug", "warning", "set_postfix", "set_description", "get_scale", "get_last_lr",
    "state_dict", "keys", "values", "items", "get", "format", "join", "is_enabled",
))
_HARMLESS_CALLS = frozenset((
    "print", "len", "range", "enumerate", "zip", "isinstance", "getattr", "hasattr", "setattr", "min", "max", "abs",
    "round", "sum", "any", "all", "float", "int", "str", "bool", "list", "dict", "tuple", "set", "sorted", "reversed",
))


_LOOP_STMTS = (ast.For, ast.AsyncFor, ast.While)
UNFOLLOWED = "unfollowed"  # a call we cannot follow


def _through(call, g) -> CallUpdate:
    """The update ``g`` (an event or a ``CallUpdate`` inside the callee) as seen at ``call``."""
    if isinstance(g, CallUpdate):
        return g if g.call is call else CallUpdate(call, g.inner, g.where)
    return CallUpdate(call, g)


def _placeholder(node) -> bool:
    """An abstract method, or a body of only a docstring, ``pass``, ``...`` and ``raise``: what
    the call runs is an override we do not see."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if any((d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")) == "abstractmethod" for d in node.decorator_list):
        return True
    return all(isinstance(s, (ast.Pass, ast.Raise)) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in node.body)


def explicit_update(e) -> bool:
    """``scaler.update(new_scale)``: sets the scale, reads no inf checks (not a protocol event)."""
    return e.kind == "update" and isinstance(e.node, ast.Call) and bool(e.node.args or e.node.keywords)


class CallUpdate:
    """A call that leaves the scaler updated: it stands for the ``update()`` inside it
    (``inner``, an event of this file; None for a function of another module, ``where``)."""

    __slots__ = ("call", "inner", "where", "seq", "node", "stmt")

    def __init__(self, call, inner, where=None):
        self.call, self.inner, self.where = call, inner, where
        self.seq, self.node, self.stmt = call.seq, call.node, call.stmt


class UpdateReach:
    """The updates of one scaler that reach each protocol event of a function with no backward
    in between: a may-analysis over the CFG, like reaching definitions. An ``update()`` that
    reaches a ``step()``/``unscale_()`` (or another ``update()``) of the same scaler closed the
    iteration before that event ran: the event works on gradients of the iteration the update
    already closed. A fact is (update, loops): the loops around the update whose back edge its
    path took. Loops are taken to run at least once.

    Every backward (scaled or not, a framework's) kills every fact. A call we cannot follow
    (builtins, ``torch.*`` functions other than autograd's, the scaler's and the optimizers' own
    methods and a few methods that never run a backward are known not to run one) kills the
    facts that went round a loop: the next pass's forward and backward run between them and
    the event, and either may hide in such a call; between two statements of one pass it is
    not taken for a backward (``step(o1); update(); helper(); step(o2)``). A call to a walked
    function of this file is read from its summary (this same analysis run on it from an entry
    fact): whether an update reaching the call reaches an event inside it, whether the fact
    survives the call, and which of its updates reach its exit (the call then stands for them,
    as a ``CallUpdate``). A function of another module is read from its project summary. An
    abstract method is not followed (an override runs). Unknown is silent: a path we cannot
    read is a path on which nothing is reported."""

    ENTRY = "entry"

    def __init__(self, model, func, keys, cfg: CFG | None = None, _stack=()):
        self.model, self.func, self.keys = model, func, frozenset(keys)
        self.cfg = cfg if cfg is not None else of(func)
        self._stack = (*_stack, func.fid)
        self._effects = self._collect()
        self.reach: dict[int, frozenset] = {}  # id(event) -> the facts reaching it
        self.exit: frozenset = frozenset()
        self._solve()

    def _collect(self) -> dict[int, list]:
        f, keys = self.func, self.keys
        out: dict[int, list] = {}
        for e in f.events:
            if e.stmt is None:
                continue
            if e.kind in _KILLS:
                out.setdefault(id(e.stmt), []).append((e.seq, "kill", e))
            elif e.scaler in keys and e.kind in ("step", "unscale", "update") and not explicit_update(e):
                if e.kind == "step" and isinstance(e.node, ast.Call) and (len(e.node.args) > 1 or e.node.keywords):
                    out.setdefault(id(e.stmt), []).append((e.seq - 0.5, "kill", e))  # step(opt, closure): it runs the closure's backward
                out.setdefault(id(e.stmt), []).append((e.seq, "use", e))
        for c in f.calls:
            if c.stmt is None:
                continue
            eff = self._call_effect(c)
            if eff is UNFOLLOWED:
                out.setdefault(id(c.stmt), []).append((c.seq, "call", (c, UNFOLLOWED)))
            elif eff is not None:
                out.setdefault(id(c.stmt), []).append((c.seq, "call", (c, *eff)))
        for v in out.values():
            v.sort(key=lambda t: t[0])
        return out

    def _call_effect(self, c):
        """None: the call cannot touch the iteration. Else (uses, passes, gens): the events
        inside it that an update reaching the call reaches, whether the facts survive it, and
        the updates it leaves reaching its exit."""
        m = self.model
        callee = m.resolve_callee(c)
        if callee is None:
            return None if self._harmless(c) else self._project_effect(c)
        if not callee.walked or callee.fid in self._stack or len(self._stack) > 4 or _placeholder(callee.node):
            return UNFOLLOWED  # (a placeholder: the override that runs is elsewhere)
        keys = set(self.keys) if any(k[0] in ("A", "G") for k in self.keys) else set()
        for pos, k in c.arg_keys:
            if k in self.keys:
                name = m._param_for(callee, pos)
                if name is None:
                    return ((), False, ())  # handed on through *args/**kwargs
                keys.add(("L", callee.fid, name))
        memo = m.__dict__.setdefault("_update_reach", {})
        mk = (callee.fid, frozenset(keys))
        if mk not in memo:
            inner = UpdateReach(m, callee, keys, _stack=self._stack)
            uses = tuple(inner.events[i] for i, facts in inner.reach.items() if any(u is self.ENTRY for u, _l in facts))
            passes = any(u is self.ENTRY for u, _l in inner.exit)
            gens = tuple(u for u, _l in inner.exit if u is not self.ENTRY)
            memo[mk] = (uses, passes, gens)
        uses, passes, gens = memo[mk]
        return None if passes and not uses and not gens else (uses, passes, gens)

    def _project_effect(self, c):
        """A function of another module, read from its composed summary: whether it runs a
        backward, and the GradScaler calls it makes on the scaler handed to it (a helper that
        steps and updates is taken to step first)."""
        hit = self.model.project_callee(c)
        if hit is None:
            return UNFOLLOWED
        path, summary, facts = hit
        ops = set()
        for pos, k in c.arg_keys:
            if k in self.keys:
                ops |= facts.scaler_ops.get(summary.param_at(pos) or "", set())
        uses, gens = bool(ops & {"step", "unscale"}), "update" in ops
        if facts.backward:
            return (), False, (CallUpdate(c, None, path),) if gens else ()
        if not uses and not gens:
            return None
        return (c,) if uses else (), not gens, (CallUpdate(c, None, path),) if gens else ()

    def _harmless(self, c) -> bool:
        m, f = self.model, self.func
        fn = c.node.func
        if isinstance(fn, ast.Name):
            return fn.id in _HARMLESS_CALLS and fn.id not in f.locals
        q = c.qualname or ""
        if q.startswith("torch.") and not q.startswith("torch.autograd"):
            return True
        if isinstance(fn, ast.Attribute):
            if fn.attr in _HARMLESS_METHODS or m.key_of_expr(fn.value, f) in self.keys:
                return True
            return m.is_optimizer(fn.value, f)
        return False

    def transfer(self, stmt, facts, record: dict | None = None):
        for _seq, what, x in self._effects.get(id(stmt), ()):
            if what == "kill":
                facts = frozenset()
            elif what == "use":
                if record is not None:
                    record[id(x)] = facts
                    self.events[id(x)] = x
                if x.kind == "update":
                    facts = frozenset({(x, ())})
            elif x[1] is UNFOLLOWED:
                facts = frozenset(f for f in facts if not f[1])  # (see the class docstring)
            else:
                c, uses, passes, gens = x
                if record is not None and uses:  # the call steps (or updates) what reaches it
                    record[id(c)] = facts
                    self.events[id(c)] = c
                facts = (facts if passes else frozenset()) | {(_through(c, g), ()) for g in gens}
        return facts

    def _edge(self, n, succ, facts):
        s = n.stmt
        if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))) and s.body and succ is not self.cfg.node_of.get(id(s.body[0])):
            return frozenset()  # into a handler before the body ran: the body's statements carry it
        if isinstance(succ.stmt, (ast.For, ast.AsyncFor, ast.While)) and s is not None and self.cfg.loop_of.get(id(s)) is not None:
            if succ.stmt in self.cfg.loops_around(s):  # a back edge: tag the updates it takes round
                return frozenset(
                    (u, (*loops, succ.stmt) if u is not self.ENTRY and succ.stmt not in loops and succ.stmt in self.cfg.loops_around(u.stmt) else loops)
                    for u, loops in facts
                )
        return facts

    def _into(self, n, after) -> frozenset:
        """The facts on entry to ``n``. A loop is taken to run at least once: its exit edge
        carries only what went round it (a ``for acc in range(accum_steps):`` holding the
        backward is not skipped)."""
        out = frozenset()
        for p in n.pred:
            if p.index not in after:
                continue
            if isinstance(p.stmt, _LOOP_STMTS) and (n.stmt is None or p.stmt not in self.cfg.loops_around(n.stmt)):
                for q in p.pred:
                    if q.index in after and q.stmt is not None and p.stmt in self.cfg.loops_around(q.stmt):
                        out |= self._edge(p, n, self._edge(q, p, after[q.index]))
                continue
            out |= self._edge(p, n, after[p.index])
        return out

    def _solve(self) -> None:
        cfg = self.cfg
        start = frozenset({(self.ENTRY, ())})
        after: dict[int, frozenset] = {cfg.entry.index: start}
        work = list(cfg.entry.succ)
        budget = 60 * max(1, len(cfg.nodes))
        while work and budget:
            budget -= 1
            n = work.pop()
            facts = self._into(n, after)
            out = self.transfer(n.stmt, facts) if n.stmt is not None else facts
            if n.index in after and after[n.index] == out:
                continue
            after[n.index] = out
            work.extend(n.succ)
        self.events: dict[int, object] = {}
        if work:  # no fixpoint within the budget: nothing is known
            return
        record: dict[int, frozenset] = {}
        for n in cfg.nodes:
            if n.stmt is not None:
                self.transfer(n.stmt, self._into(n, after), record)
        self.reach = record
        self.exit = after.get(cfg.exit.index, frozenset())

    def premature(self):
        """(update, event, loops) for each update of this function that reaches a later
        protocol event inside every loop the update is in: the update, the first event it
        reaches, and the loops its path went round (empty: later in the same pass)."""
        out = {}
        around = self.cfg.loops_around
        for i, facts in self.reach.items():
            e = self.events[i]
            for u, loops in facts:
                if u is self.ENTRY or u is e or (isinstance(u, CallUpdate) and u.call is e):
                    continue  # (an update reaching itself round a loop with nothing else in it)
                if not set(around(u.stmt)) <= set(around(e.stmt)):
                    continue  # after a loop the update is in (a flush of what the last passes left)
                prev = out.get(id(u))
                if prev is None or (bool(prev[2]), prev[1].seq) > (bool(loops), e.seq):
                    out[id(u)] = (u, e, loops)
        return sorted(out.values(), key=lambda t: t[0].seq)


def scaler_in_use(model) -> bool:
    """Is a GradScaler in use anywhere in this file, under any name: a scaler the model keys, a
    scale/step event, or a GradScaler method called on an attribute named like a scaler that the
    model keys no scaler (``context.grad_scaler.scale(loss)``: the object holding it comes from
    elsewhere)?"""
    if model.scaler_keys() or any(True for _ in model.events("scale")) or any(True for _ in model.events("step")):
        return True
    for f in model.funcs:
        for mc in f.methods:
            r = mc.receiver_node
            if mc.called and mc.attr in ("scale", "step", "update", "unscale_") and isinstance(r, ast.Attribute) and SCALER_NAME.match(r.attr):
                return True
    return False
