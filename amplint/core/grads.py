"""The gradients a GradScaler's scaled backward produced, as a state over a function's CFG.

For one abstract scaler (a model key) the state on entry to every statement is, per
*assumption set* (the outcomes of the ``if`` tests around this analysis' own events, as in
``typestate``), the set of facts that **may** hold on some path here since the scaler's last
``update()``:

* ``("B", backward)``: gradients of a scaled backward (``scaler.scale(loss).backward()``);
* ``("U", x)``: ``unscale_()`` ran since that backward, or a call we cannot follow may have run
  it (x is the call): Top for the "still scaled" question, which it then never answers yes;
* ``("S", step)``: a ``scaler.step()`` ran;
* ``("W", item)``: a watched statement (a clip or gradient-norm read on still-scaled gradients,
  a ``zero_grad()`` of scaled gradients) ran and no scaled backward (nor a call that may run
  one) has written fresh gradients since: does it *reach* a later ``step()``?
* ``("P", backward)``: gradients of a plain (unscaled) backward that no ``zero_grad()`` nor
  plain ``optimizer.step()`` (the ``plain_kills``) has consumed since; a later scaled backward
  adds to them, it does not replace them.

With ``live=True`` (what a plain ``optimizer.step()`` would apply) also:

* ``("L", backward)``: the scaled backward's gradients are still in ``.grad``: ``update()``
  does not end them, a ``zero_grad()`` (the ``plain_kills``) does, and so does a plain
  backward after them (the gradients are then a mix: unknown);
* ``("Q", step)``: ``scaler.step()`` ran for those gradients (ends with them).

A scaled backward writes fresh scaled gradients (it ends every ``U`` and ``W``); ``update()``
closes the iteration (it ends ``B``, ``U`` and ``S``). Paths that assume both outcomes of one
test are infeasible and dropped; assumptions about tests inside a loop are forgotten at its
head. With more assumption sets than ``MAX_ASSUMPTIONS`` nothing is known (no query answers).

Also here: which calls read the gradients' magnitude (``grad_reads``), and the value flow that
tells a norm unscaled by hand (``norm_unscaled_by_hand``).
"""

from __future__ import annotations

import ast
import re

from amplint.lazyre import lazy
from amplint.core.cfg import CFG, of, varies
from amplint.model.facts import CERTAIN, Event
from amplint.model.filemodel import NOT_OPTIMIZER, OPTIMIZER_NAME
from amplint.model.walker import _norm_test
from amplint.model.names import qualify
from amplint.model.queries_extra import ancestry

MAX_ASSUMPTIONS = 64
GRAD_READ = {"norm", "abs", "max"}
CLIP_HELPER = lazy(r"clip|grad_?norm|norm_?grad", re.IGNORECASE)
_MODULE_READERS = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children", "buffers", "state_dict"})


class GradStates:
    """The gradient facts of scaler ``key`` on entry to each statement of ``func``; ``watch``:
    the clips/norm reads (kind "read") and ``zero_grad`` events to follow forward."""

    def __init__(self, model, func, key, watch=(), cfg: CFG | None = None, plain=(), plain_kills=(),
                 live=False, marks=(), backs=()):
        self.model, self.func, self.key, self.live = model, func, key, live
        self.cfg = cfg if cfg is not None else of(func)
        self._items = self._collect(watch, plain, plain_kills, marks, backs)
        self._guards = self._guarding_ifs()
        self.before = self._solve()

    def _collect(self, watch, plain=(), plain_kills=(), marks=(), backs=()) -> dict[int, list]:
        """Per statement, in order: (seq, kind, object) for B, U, S, R (update), K (a call that may
        back-propagate afresh), W (a watched read: needs B and no U), Z (a watched zero_grad), P
        and X (a plain backward and what consumes it) and N (a mark: no effect, but the tests
        guarding it are followed). ``backs``: backward events at calls (a project helper's), B
        when scaled with this scaler, P otherwise."""
        m, f, key = self.model, self.func, self.key
        out: dict[int, list] = {}

        def add(x, kind):
            if x.stmt is not None:
                out.setdefault(id(x.stmt), []).append((x.seq, kind, x))

        for e in f.events:
            if e.scaler == key and (e.kind != "backward" or e.scaled):
                kind = {"backward": "B", "unscale": "U", "step": "S", "update": "R"}.get(e.kind)
                if kind:
                    add(e, kind)
        for c in f.calls:
            if may_unscale(m, c, key):
                add(c, "U")
            elif may_backward(m, c):
                add(c, "K")
        for w in watch:
            add(w, "Z" if getattr(w, "kind", None) == "zero_grad" else "W")
        for b in plain:
            add(b, "P")
        for x in plain_kills:
            add(x, "X")
        for x in marks:
            add(x, "N")
        for b in backs:
            add(b, "B" if b.scaled and b.scaler == key else "P")
        for v in out.values():
            v.sort(key=lambda t: t[0])
        return out

    def _guarding_ifs(self) -> dict[int, tuple]:
        out = {}
        for n in self.cfg.nodes:
            s = n.stmt
            if isinstance(s, ast.If) and id(s) in self.cfg.arms:
                if any(i in self._items for i in self.cfg.under(s) if i != id(s)):
                    k, pol = _norm_test(s.test)
                    if k is not None:
                        out[id(s)] = (k, pol, s.test)
        return out

    def _varies(self, loop, test) -> bool:
        return varies(self.cfg, loop, test)

    def transfer(self, items, state: frozenset) -> frozenset:
        live = self.live
        for _seq, kind, x in items:
            has = {f[0] for f in state}
            if kind == "N":
                continue
            if kind == "B":
                state = frozenset(f for f in state if f[0] not in "UW") | {("B", x)} | ({("L", x)} if live else set())
            elif kind == "K":
                state = frozenset(f for f in state if f[0] != "W")
            elif kind in "US":
                state = state | {(kind, x)} | ({("Q", x)} if live and kind == "S" and "L" in has else set())
            elif kind == "R":
                state = frozenset(f for f in state if f[0] in "WPLQ")
            elif kind == "P":
                state = frozenset(f for f in state if f[0] not in "LQ") | {("P", x)}
            elif kind == "X":
                state = frozenset(f for f in state if f[0] not in "PLQ")
            elif "B" in has and (kind == "Z" or "U" not in has):
                state = state | {("W", x)}
        return state

    def _edge(self, n, succ, states: dict) -> dict:
        g = self._guards.get(id(n.stmt)) if n.stmt is not None else None
        out: dict = {}
        if n.index in self._back_w and self.cfg.node_of.get(id(n.stmt.body[0])) is not succ:
            # leaving a loop: a watched item only gets out through its body (the loop is assumed
            # to run, so a zero-trip path past a backward inside it adds no finding)
            keep = self._back_w[n.index]
            states = {a: frozenset(f for f in st if f[0] != "W" or f in keep) for a, st in states.items()}
        if g is not None and succ in self.cfg.arms[id(n.stmt)]:
            then, _other = self.cfg.arms[id(n.stmt)]
            k, pol = g[0], g[1] if succ is then else not g[1]
            for a, st in states.items():
                if (k, not pol) not in {(x[0], x[1]) for x in a}:
                    b = a | {(k, pol, id(n.stmt))}
                    out[b] = out.get(b, frozenset()) | st
            return out
        if isinstance(succ.stmt, (ast.For, ast.AsyncFor, ast.While)):
            # at the loop's head, forget the outcomes of tests inside it that may change between
            # iterations (``if (i + 1) % accum == 0``); a loop-invariant one (``if use_amp``) holds
            inside = self.cfg.under(succ.stmt)
            for a, st in states.items():
                b = frozenset(x for x in a if x[2] not in inside or not self._varies(succ.stmt, self._guards[x[2]][2]))
                out[b] = out.get(b, frozenset()) | st
            return out
        return states

    def _through_body(self, n, after):
        """At a loop header: the watched facts its back edges bring round (None elsewhere)."""
        if not isinstance(n.stmt, (ast.For, ast.AsyncFor, ast.While)):
            return None
        inside = self._inside.get(n.index)
        if inside is None:
            inside = self._inside[n.index] = self.cfg.under(n.stmt) - {id(n.stmt)}
        return frozenset(
            f for p in n.pred if p.stmt is not None and id(p.stmt) in inside
            for st in after.get(p.index, {}).values() for f in st if f[0] == "W"
        )

    def _solve(self) -> dict[int, dict]:
        cfg = self.cfg
        self._back_w: dict[int, frozenset] = {}
        self._inside: dict[int, set] = {}
        before: dict[int, dict] = {}
        after: dict[int, dict] = {cfg.entry.index: {frozenset(): frozenset()}}
        work = list(cfg.entry.succ)
        budget = 60 * max(1, len(cfg.nodes))
        while work and budget:
            budget -= 1
            n = work.pop()
            states: dict = {}
            for p in n.pred:
                for a, st in self._edge(p, n, after.get(p.index, {})).items():
                    states[a] = states.get(a, frozenset()) | st
            if len(states) > MAX_ASSUMPTIONS:
                return {}
            if not states:
                continue
            items = self._items.get(id(n.stmt), ()) if n.stmt is not None else ()
            out = {a: self.transfer(items, st) for a, st in states.items()}
            back = self._through_body(n, after)
            if before.get(n.index) == states and after.get(n.index) == out and self._back_w.get(n.index) == back:
                continue
            before[n.index], after[n.index] = states, out
            if back is not None:
                self._back_w[n.index] = back
            work.extend(n.succ)
        return {} if work else before  # no fixpoint within the budget: nothing is known

    def facts_before(self, x) -> list[frozenset]:
        """The facts just before ``x`` (an event or call), one set per assumption set: its
        statement's entry states and the items of that statement before it (not inside it)."""
        n = self.cfg.node_of.get(id(x.stmt))
        inner = {id(y) for y in ast.walk(x.node)}
        prefix = [t for t in self._items.get(id(x.stmt), ()) if t[0] < x.seq and id(t[2].node) not in inner]
        return [self.transfer(prefix, st) for st in (self.before.get(n.index, {}) if n else {}).values()]

    def scaled_at(self, x) -> bool:
        """Do gradients of a scaled backward reach ``x`` with no ``unscale_`` (nor a call that may
        run it) since, under some assumption set, and under none with one (``if clip:
        scaler.unscale_(opt)`` before an unconditional clip is trusted to go with it)?"""
        kinds = [{f[0] for f in st} for st in self.facts_before(x)]
        return any("B" in k and "U" not in k for k in kinds) and not any("B" in k and "U" in k for k in kinds)

    def live_at(self, event, loops=None):
        """The scaled backward whose gradients a plain ``optimizer.step()`` at ``event`` would
        apply, on some path, or None: its ``L`` fact reaches ``event`` under some assumption set
        (a backward inside every loop in ``loops`` when given), unless the scaler stepped another optimizer for them and
        a plain backward's gradients reach ``event`` too (a second, fp32 optimizer stepping its
        own loss: unknown)."""
        opt = getattr(event, "optimizer", None)
        hit = [
            f[1] for st in self.facts_before(event)
            if not (any(f[0] == "P" for f in st) and any(f[0] == "Q" and f[1].optimizer != opt for f in st))
            for f in st if f[0] == "L" and (loops is None or loops <= {id(lp) for lp in f[1].loops})
        ]
        # the latest backward before it in the pass, else (round the loop only) the latest one
        before = [b for b in hit if b.seq < event.seq]
        return max(before or hit, key=lambda b: b.seq, default=None)

    def unscaled_for(self, event) -> bool:
        """Did ``unscale_()`` of ``event``'s optimizer run since the live scaled backward, on some
        path?"""
        opt = getattr(event, "optimizer", None)
        return any(f[0] == "U" and getattr(f[1], "optimizer", None) == opt for st in self.facts_before(event) for f in st)

    def plain_reaches(self, backward, event) -> bool:
        """Do the gradients of the plain ``backward`` reach ``event`` unconsumed, on some path?"""
        return any(("P", backward) in st for st in self.facts_before(event))

    def reaches(self, watched, event) -> bool:
        """Does the watched item reach ``event`` (no fresh backward in between) on some path?"""
        return any(("W", watched) in st for st in self.facts_before(event))


def may_unscale(model, call, key) -> bool:
    """Could the call run ``unscale_`` on the scaler ``key``? A function of this file that
    unscales, one we did not walk that mentions ``unscale_``, an unresolved call handed the
    scaler, or an unknown method of the object holding it. ``model.parameters()`` never does."""
    if isinstance(call.callee, ast.Attribute) and call.callee.attr in _MODULE_READERS:
        return False
    callee = model.resolve_callee(call)
    if callee is not None:
        return model.mentions(callee, "unscale_") if not callee.walked else any(e.kind == "unscale" for e in callee.events)
    return any(k == key for _p, k in call.arg_keys) or bool(key and key[0] == "A" and model.calls_self_unknown(call))


def may_backward(model, call) -> bool:
    """Does a project function the call resolves to back-propagate (fresh gradients)?"""
    callee = model.resolve_callee(call)
    if callee is not None:
        return model.mentions(callee, "backward(") if not callee.walked else any(e.kind == "backward" for e in callee.events)
    hit = model.project_callee(call)
    return hit is not None and bool(hit[2].backward)


class Read:
    """A gradient-magnitude read that is not a clip event (a helper call, ``p.grad.norm()``),
    shaped like an event (``helper``: a project helper that clips, never fixed)."""

    kind = "grad_read"

    def __init__(self, x, helper=False):
        self.node, self.stmt, self.seq, self.ctx, self.func, self.helper = x.node, x.stmt, x.seq, x.ctx, x.func, helper

    @property
    def loops(self):
        return self.ctx.loops

    def co_occurs(self, other) -> bool:
        from amplint.model import exclusive

        return not exclusive(self.ctx.lits, other.ctx.lits)


def grad_reads(model, f):
    """(item, label) for every read of the gradients' magnitude in ``f``: torch's clips and norms
    (``clip_grad_norm_``, ``get_total_norm``), a project helper named for clipping that calls one
    and does not unscale (same file or another module), and ``p.grad.norm()``/``abs``/``max``."""
    for e in f.events:
        if e.kind == "clip":
            yield e, f"`{model.text(e.node.func).rsplit('.', 1)[-1]}`"
    for c in f.calls:
        if CLIP_HELPER.search(model.text(c.node.func).rsplit(".", 1)[-1]):
            hit = model.project_callee(c)
            if hit is not None and hit[2].clips and not any("unscale" in ops for ops in hit[2].scaler_ops.values()):
                yield Read(c, helper=True), f"`{model.text(c.node.func)}()` (it calls `clip_grad_norm_`)"
    for mc in f.methods:
        if mc.called and mc.attr in GRAD_READ and isinstance(mc.receiver_node, ast.Attribute):
            r = mc.receiver_node
            if r.attr == "data" and isinstance(r.value, ast.Attribute):
                r = r.value
            if r.attr == "grad":
                yield Read(mc), f"`{model.text(mc.receiver_node)}.{mc.attr}()`"


def norm_unscaled_by_hand(c, f) -> bool:
    """A norm unscaled by hand: ``total_norm(...) / scaler.get_scale()`` in the read's statement,
    or, for a norm that is only read (not clipped), the name it is bound to divided by the scale
    in a later statement (``gn = gn / scaler.get_scale()``, ``gn /= scale``)."""
    for n in ast.walk(c.stmt):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and any(x is c.node for x in ast.walk(n.left)):
            if _is_scale(n.right, ()):
                return True
    return only_reads(c) and divided_later(c, f)


def divided_later(c, f) -> bool:
    """The name the read's statement binds to the norm is divided by the scale in a later
    statement (``scale = scaler.get_scale()`` binds a name to the scale)."""
    stmt = c.stmt
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return False
    name = stmt.targets[0].id
    scales = {
        t.id for n in ast.walk(f.node) if isinstance(n, ast.Assign) and _is_scale(n.value, ())
        for t in n.targets if isinstance(t, ast.Name)
    }
    for n in ast.walk(f.node):
        if getattr(n, "lineno", 0) <= stmt.lineno:
            continue
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and isinstance(n.target, ast.Name) and n.target.id == name:
            if _is_scale(n.value, scales):
                return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and isinstance(n.left, ast.Name) and n.left.id == name:
            if _is_scale(n.right, scales):
                return True
    return False


def only_reads(c) -> bool:
    """The gradients are only read (a norm), not clipped: ``p.grad.norm()``, ``get_total_norm``,
    or a clip with an infinite threshold. A real clip of scaled gradients is wrong whatever is
    done with the norm it returns."""
    if c.kind == "grad_read":
        return not c.helper
    node = c.node
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name == "get_total_norm":
        return True
    limit = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "max_norm"), None)
    return limit is not None and _infinite(limit)


def _infinite(expr) -> bool:
    """``float("inf")``, ``math.inf``, ``torch.inf``, ``np.inf``."""
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) == "float" and expr.args:
        a = expr.args[0]
        return isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.strip().lower() in ("inf", "+inf", "infinity")
    return isinstance(expr, ast.Attribute) and expr.attr == "inf"


def _is_scale(expr, scales) -> bool:
    """``scaler.get_scale()`` (anywhere in ``expr``) or a name bound to it."""
    return any(
        (isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "get_scale")
        or (isinstance(x, ast.Name) and x.id in scales)
        for x in ast.walk(expr)
    )


def helper_backwards(model, f) -> list:
    """Backwards that run inside project helpers called from ``f``: a helper handed a
    scaler whose summary scales with it (``train(model, optim, batch, scaler=scaler)``
    running ``scaler.scale(loss).backward()``) is a scaled backward at the call; a helper
    that runs a backward and is handed no scaler is a plain one (it ends the scaled
    gradients' reach). Unresolved calls add nothing (unknown)."""
    out = []
    for c in f.calls:
        if not (c.arg_keys or c.node.args or c.node.keywords) or c.qualname in (None, "torch.save"):
            continue
        hit = model.project_callee(c)
        if hit is None:
            continue
        _path, callee, facts = hit
        scaled = next(
            ((k, ops) for pos, k in c.arg_keys
             if model.scaler_status(k) == CERTAIN and "scale" in (ops := facts.scaler_ops.get(callee.param_at(pos) or "", ()))),
            None,
        )
        if scaled is not None:
            out.append(Event("backward", c.node, c.stmt, c.seq, f, c.ctx, scaler=scaled[0], scaled=True,
                             extra={"helper": model.text(c.node.func), "updates": "update" in scaled[1]}))
        elif facts.backward and not facts.scaler_ops:
            out.append(Event("backward", c.node, c.stmt, c.seq, f, c.ctx, extra={"helper": model.text(c.node.func)}))
    return out


# Plain optimizer steps the walker does not classify (AMP004 asks whether a scaled backward's
# gradients reach them).


def loop_steps(model, f):
    """``for opt in optimizers: opt.step()``: a plain step on the target of a loop over
    optimizers (the walker only classifies receivers that are named like an optimizer)."""
    out = []
    for mc in f.methods:
        if not mc.called or mc.attr != "step" or mc.node.args or mc.node.keywords:
            continue
        if not isinstance(mc.receiver_node, ast.Name) or model.is_scaler(mc.receiver):
            continue
        if any(e.kind == "opt_step" and e.node is mc.node for e in f.events):
            continue
        name = mc.receiver_node.id
        loop = next((lp for lp in reversed(mc.ctx.loops) if name in lp.targets), None)
        it = getattr(getattr(loop, "node", None), "iter", None)
        if it is None or not OPTIMIZER_NAME.search(model.text(it)) or NOT_OPTIMIZER.search(model.text(it)):
            continue
        out.append(Event("opt_step", mc.node, mc.stmt, mc.seq, f, mc.ctx, optimizer=name, receiver=mc.receiver,
                         extra={"nofix": True}))
    return out


def lambda_steps(model):
    """``step = lambda: optimizer.step()`` called as ``step()``: an event at each call."""
    out: dict[int, list] = {}
    for key, assigns in model.assigns.items():
        for a in assigns:
            lam = a.value
            if not isinstance(lam, ast.Lambda) or lam.args.args:
                continue
            body = lam.body
            if not (
                isinstance(body, ast.Call) and isinstance(body.func, ast.Attribute) and body.func.attr == "step"
                and not body.args and not body.keywords
            ):
                continue
            recv = body.func.value
            if model.is_scaler(model.key_of_expr(recv, a.func)) or not model.is_optimizer(recv, a.func):
                continue
            for c in model.qual_calls:
                if c.node.args or c.node.keywords or model.key_of_expr(c.callee, c.func) != key:
                    continue
                out.setdefault(c.func.fid, []).append(
                    Event("opt_step", c.node, c.stmt, c.seq, c.func, c.ctx, optimizer=model.text(recv),
                          extra={"nofix": True, "report": body, "report_stmt": a.stmt})
                )
    return out


# Forwards that nothing differentiates (AMP201 asks whether an fp16 region trains).

_NO_GRAD = ("torch.no_grad", "torch.inference_mode")


def _no_grad_with(f, node) -> bool:
    return isinstance(node, (ast.With, ast.AsyncWith)) and any(
        isinstance(i.context_expr, ast.Call) and (qualify(i.context_expr.func, f.scopes()) or "") in _NO_GRAD
        for i in node.items
    )


def without_grad(model, f, stmt) -> bool:
    """Is the ``with`` statement ``stmt`` inside ``torch.no_grad()``/``inference_mode()``, or is
    its whole body one such block?"""
    if any(_no_grad_with(f, owner) for owner, _field, _i in ancestry(model, f, stmt)):
        return True
    body = getattr(stmt, "body", None)
    return bool(body) and all(_no_grad_with(f, s) for s in body)
