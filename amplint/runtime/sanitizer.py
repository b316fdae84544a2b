"""Catch AMP misuse live: ``with sanitize(): train()``.

While active, the sanitizer patches (and on exit restores, identity included):

* ``torch.amp.GradScaler.scale/unscale_/step/update`` at class level (subclasses that override
  these methods, e.g. FSDP's ``ShardedGradScaler``, are not seen);
* ``torch.autograd.backward`` (``Tensor.backward`` looks it up at call time);
* ``torch.nn.utils.clip_grad._get_total_norm``, the module global ``clip_grad_norm_`` calls,
  so a ``clip_grad_norm_`` imported before tracing is still seen (also exported as
  ``torch.nn.utils.get_total_norm``, which is patched too when it is the same function);
* ``torch.amp.autocast_mode.autocast.__enter__/__exit__`` (event log only);
* ``torch.optim.Optimizer.zero_grad`` and a global optimizer step pre-hook
  (``torch.optim.optimizer.register_optimizer_step_pre_hook``, handle removed on exit).

It keeps a state machine per scaler (an "iteration" runs from one ``update()`` to the next)
and reports each misuse with the static rule code, a message and the user's ``file:line``
(the first stack frame outside torch and ``amplint.runtime``). A violation is recorded
*before* the patched call runs, so a misuse that torch then rejects with an exception is
still reported by code:

AMP001  ``scaler.step`` not followed by ``scaler.update()`` before the next iteration's
        ``scale``/``step``/``unscale_`` (or when the sanitizer exits);
AMP002  ``backward()`` inside an enabled autocast region;
AMP003  a second GradScaler stepping the same optimizer;
AMP004  ``optimizer.step()`` outside ``scaler.step`` while scaled gradients are live;
AMP005  ``unscale_``/``step`` when only unscaled backwards ran since the last update;
AMP006  a total-norm (``clip_grad_norm_``) computation on scaled, not yet unscaled gradients;
AMP007  ``update()`` with no ``step`` since the last update (twice per iteration), or an
        ``update()`` between two optimizers' steps;
AMP008  ``unscale_`` or ``step`` twice for one optimizer before ``update``;
AMP009  ``optimizer.zero_grad()`` between the scaled backward and ``scaler.step``.

A backward counts as scaled when the root's ``grad_fn`` reaches a ``scale()`` output within
4 graph hops (``scale(loss)/N`` and ``scale(l1) + scale(l2)`` count). Disabled scalers are
not checked (torch makes them pass-throughs), but they are counted: :meth:`Sanitizer.stats`
lists every GradScaler seen (its device, whether it is enabled and, if not, why: "enabled=False
was passed" or "CUDA is not available"), the calls made on each, the autocast regions entered,
backward calls and optimizer steps, which is what ``amplint trace`` summarises. Not
thread-safe; ``torch.autograd.grad`` is not tracked.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.nn.utils.clip_grad as _clip_grad
import torch.optim.optimizer as _optim_mod
from torch.amp import autocast_mode as _autocast_mode

__all__ = ["Violation", "AmpViolation", "Sanitizer", "sanitize", "measure_overhead", "CODES"]

CODES = {
    "AMP001": "scaler.step() without scaler.update()",
    "AMP002": "backward inside autocast",
    "AMP003": "two GradScalers step one optimizer",
    "AMP004": "optimizer.step() bypasses scaler.step()",
    "AMP005": "unscaled backward with scaler.step()",
    "AMP006": "grad norm of scaled gradients (clip before unscale_)",
    "AMP007": "scaler.update() misplaced",
    "AMP008": "unscale_/step twice for one optimizer",
    "AMP009": "zero_grad between scaled backward and step",
}

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP_PREFIXES = (_TORCH_DIR, _RUNTIME_DIR)
_SKIP_FILES = {os.path.abspath(contextlib.__file__)}
try:  # torch's deprecation wrappers (torch.cuda.amp.GradScaler()) live in typing_extensions
    import typing_extensions as _te

    _SKIP_FILES.add(os.path.abspath(_te.__file__))
except ImportError:  # pragma: no cover
    pass
_GRAPH_HOPS = 4
_MAX_SCALED_NODES = 4096


@dataclass
class Violation:
    code: str
    message: str
    path: str
    line: int
    count: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "path": self.path,
                "line": self.line, "count": self.count}


class AmpViolation(RuntimeError):
    """Raised at the offending call when ``raise_on_violation=True``."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


def _user_location() -> tuple[str, int]:
    f = sys._getframe(1)
    fallback: tuple[str, int] | None = None
    while f is not None:
        fn = f.f_code.co_filename
        absfn = os.path.abspath(fn) if not fn.startswith("<") else fn
        if fallback is None:
            fallback = (fn, f.f_lineno)
        if not absfn.startswith(_SKIP_PREFIXES) and absfn not in _SKIP_FILES \
                and not fn.startswith("<frozen"):
            return fn, f.f_lineno
        f = f.f_back
    return fallback or ("<unknown>", 0)


class _ScalerState:
    __slots__ = (
        "ref", "has_scaled", "scaled_bw", "unscaled_mark", "unscaled_opts", "stepped_opts",
        "last_step_loc", "last_update_loc", "n_updates", "scaled_bw_before_update",
        "missing_update_reported", "activity_since_step", "live", "__weakref__",
    )

    def __init__(self, scaler: Any, unscaled_mark: int) -> None:
        self.ref = weakref.ref(scaler)
        self.has_scaled = False
        self.scaled_bw = 0  # scaled backwards since the last update
        self.unscaled_mark = unscaled_mark  # global unscaled-backward count at the last update
        self.unscaled_opts: dict[int, Any] = {}  # id(opt) -> weakref(opt), unscaled since update
        self.stepped_opts: dict[int, Any] = {}  # id(opt) -> weakref(opt), stepped since update
        self.last_step_loc: tuple[str, int] | None = None
        self.last_update_loc: tuple[str, int] | None = None
        self.n_updates = 0
        self.scaled_bw_before_update = 0
        self.missing_update_reported = False
        self.activity_since_step = False  # scale/backward after the last step (next iteration)
        self.live = False  # scaled grads produced and not yet consumed by a step or update


class Sanitizer:
    """Patches torch while active (use :func:`sanitize` or ``with Sanitizer():``)."""

    def __init__(self, *, raise_on_violation: bool = False, report: bool = True,
                 stream: Any = None, max_events: int = 500) -> None:
        self.raise_on_violation = raise_on_violation
        self.report = report
        self.stream = stream
        self.violations: list[Violation] = []
        self.events: collections.deque[str] = collections.deque(maxlen=max_events)
        self._index: dict[tuple[str, str, int], Violation] = {}
        self._scalers: dict[int, _ScalerState] = {}
        self._scaled_nodes: collections.OrderedDict[int, tuple[Any, _ScalerState]] = collections.OrderedDict()
        self._opt_owner: dict[int, _ScalerState] = {}
        self._amp003_reported: set[int] = set()
        self._n_unscaled_bw = 0
        self._unscaled_at_last_optstep = 0
        self._in_step = 0
        self._in_scaler_call = 0
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._hook_handle: Any = None
        self._active = False
        self._warned: set[Any] = set()
        self._init_stats()

    def _init_stats(self) -> None:
        self._seen: dict[int, dict[str, Any]] = {}  # id(scaler) -> info (kept alive by _seen_refs)
        self._seen_refs: dict[int, Any] = {}
        self._autocast_counts: dict[tuple[str, str, bool], int] = {}
        self._n_backward = 0
        self._n_scaled_backward = 0
        self._n_opt_steps = 0

    def reset(self) -> None:
        """Forget every finding and count (a forked child starts its own report); patches stay."""
        self.violations = []
        self.events.clear()
        self._index = {}
        self._scalers = {}
        self._scaled_nodes = collections.OrderedDict()
        self._opt_owner = {}
        self._amp003_reported = set()
        self._n_unscaled_bw = 0
        self._unscaled_at_last_optstep = 0
        self._in_step = 0
        self._in_scaler_call = 0
        self._init_stats()

    # ------------------------------------------------------------------ statistics

    def _seen_info(self, scaler: Any, *, requested: Any = None, loc: tuple[str, int] | None = None,
                   created: bool = False) -> dict[str, Any]:
        key = id(scaler)
        info = self._seen.get(key)
        if info is not None and self._seen_refs.get(key) is not None and self._seen_refs[key]() is scaler:
            return info
        enabled = self._enabled(scaler)
        device = str(getattr(scaler, "_device", "?"))
        if enabled:
            reason = None
        elif created and requested is False:
            reason = "enabled=False was passed"
        elif device == "cuda" and not torch.cuda.is_available():
            reason = "CUDA is not available"
        elif not created:
            reason = "disabled (created before tracing started)"
        else:
            reason = "torch disabled it"
        cls = type(scaler)
        info = {"type": f"{cls.__module__.replace('.grad_scaler', '')}.{cls.__qualname__}",
                "device": device, "enabled": enabled, "reason": reason,
                "created_at": f"{loc[0]}:{loc[1]}" if loc else None,
                "scale": 0, "unscale_": 0, "step": 0, "update": 0}
        try:
            self._seen_refs[key] = weakref.ref(scaler)
        except TypeError:  # pragma: no cover - GradScaler supports weak references
            self._seen_refs[key] = lambda: scaler
        self._seen[key] = info
        return info

    def _count(self, scaler: Any, what: str) -> None:
        if self._active:
            self._seen_info(scaler)[what] += 1

    def stats(self) -> dict[str, Any]:
        """What this sanitizer saw (JSON-serialisable): scalers, autocast regions, backward calls,
        optimizer steps, and whether anything was checked."""
        scalers = [dict(v) for v in self._seen.values()]
        autocast = [{"device": d, "dtype": t, "enabled": e, "count": n}
                    for (d, t, e), n in self._autocast_counts.items()]
        used_enabled = [v for v in scalers if v["enabled"] and (v["scale"] or v["step"] or v["update"])]
        ac_enabled = [a for a in autocast if a["enabled"]]
        return {
            "scalers": scalers, "autocast": autocast, "backward": self._n_backward,
            "scaled_backward": self._n_scaled_backward, "optimizer_steps": self._n_opt_steps,
            "checked": bool(used_enabled or (ac_enabled and self._n_backward)),
            "active": bool(scalers or autocast or self._n_backward or self._n_opt_steps or self.violations),
        }

    # ------------------------------------------------------------------ reporting

    def _violate(self, code: str, message: str, loc: tuple[str, int] | None = None) -> None:
        path, line = loc or _user_location()
        key = (code, path, line)
        v = self._index.get(key)
        if v is not None:
            v.count += 1
        else:
            v = Violation(code, message, path, line)
            self._index[key] = v
            self.violations.append(v)
        self.events.append(f"VIOLATION {code} at {path}:{line}")
        if self.raise_on_violation:
            raise AmpViolation(v)

    @property
    def codes(self) -> list[str]:
        return [v.code for v in self.violations]

    def summary(self) -> str:
        if not self.violations:
            return "amplint sanitizer: no AMP misuse seen"
        lines = [f"amplint sanitizer: {len(self.violations)} AMP misuse(s) seen"]
        for v in self.violations:
            lines.append(f"  {v}" + (f" (x{v.count})" if v.count > 1 else ""))
        return "\n".join(lines)

    # ------------------------------------------------------------------ state helpers

    def _state(self, scaler: Any) -> _ScalerState:
        st = self._scalers.get(id(scaler))
        if st is None or st.ref() is not scaler:
            # unscaled backwards since the last optimizer step count against a scaler first seen now
            st = _ScalerState(scaler, self._unscaled_at_last_optstep)
            self._scalers[id(scaler)] = st
        return st

    @staticmethod
    def _enabled(scaler: Any) -> bool:
        return bool(getattr(scaler, "_enabled", True))

    def _remember_scaled(self, out: Any, st: _ScalerState) -> None:
        stack = [out]
        while stack:
            o = stack.pop()
            if isinstance(o, torch.Tensor):
                if o.grad_fn is not None:
                    self._scaled_nodes[id(o.grad_fn)] = (o.grad_fn, st)
                    self._scaled_nodes.move_to_end(id(o.grad_fn))
            elif isinstance(o, (list, tuple)):
                stack.extend(o)
            elif isinstance(o, dict):
                stack.extend(o.values())
        while len(self._scaled_nodes) > _MAX_SCALED_NODES:
            self._scaled_nodes.popitem(last=False)

    def _scaled_owner(self, tensors: Any) -> _ScalerState | None:
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors or ())
        frontier = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        seen: set[int] = set()
        for _ in range(_GRAPH_HOPS + 1):
            nxt = []
            for node in frontier:
                if node is None or id(node) in seen:
                    continue
                seen.add(id(node))
                hit = self._scaled_nodes.get(id(node))
                if hit is not None and hit[0] is node:
                    return hit[1]
                nxt.extend(n for n, _ in getattr(node, "next_functions", ()))
            frontier = nxt
        return None

    def _check_next_iteration(self, st: _ScalerState, what: str) -> None:
        """AMP001: a new iteration started while the previous step was never followed by update()."""
        if st.stepped_opts and st.activity_since_step and not st.missing_update_reported:
            st.missing_update_reported = True
            here = "%s:%d" % _user_location()
            self._violate(
                "AMP001",
                f"scaler.step() was not followed by scaler.update() before the next iteration's "
                f"scaler.{what}() at {here}; call scaler.update() once per iteration after stepping "
                f"(torch raises 'step() has already been called since the last update().')",
                st.last_step_loc,
            )

    # ------------------------------------------------------------------ patched functions

    def _scale(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def scale(scaler: Any, outputs: Any, *a: Any, **k: Any) -> Any:
            san._count(scaler, "scale")
            if not san._active or not san._enabled(scaler):
                return orig(scaler, outputs, *a, **k)
            st = san._state(scaler)
            san.events.append("scale")
            if st.stepped_opts:
                st.activity_since_step = True
                san._check_next_iteration(st, "scale")
            san._in_scaler_call += 1
            try:
                out = orig(scaler, outputs, *a, **k)
            finally:
                san._in_scaler_call -= 1
            st.has_scaled = True
            san._remember_scaled(out, st)
            return out

        return scale

    def _pre_unscale_or_step(self, st: _ScalerState, optimizer: Any, what: str) -> None:
        oid = id(optimizer)
        if oid in st.stepped_opts:
            if st.activity_since_step:
                self._check_next_iteration(st, what)
            elif not st.missing_update_reported:
                prev = st.last_step_loc
                torch_msg = ("'unscale_() is being called after step().'" if what == "unscale_"
                             else "'step() has already been called since the last update().'")
                at = f" (step at {prev[0]}:{prev[1]})" if prev else ""
                self._violate(
                    "AMP008",
                    f"scaler.{what}() on an optimizer that scaler.step() already stepped since the "
                    f"last scaler.update(){at}; torch raises {torch_msg}",
                )
            return
        if what == "unscale_" and oid in st.unscaled_opts:
            self._violate(
                "AMP008",
                "scaler.unscale_() called twice for one optimizer before scaler.update(); torch raises "
                "'unscale_() has already been called on this optimizer since the last update().'",
            )
            return
        if oid in st.unscaled_opts:
            return  # step after a proper unscale_: checked at unscale_ time
        unscaled_bw = self._n_unscaled_bw - st.unscaled_mark
        if st.scaled_bw == 0 and unscaled_bw > 0:
            fresh = "" if st.has_scaled else (
                " (torch raises 'Attempted step but _scale is None' on this fresh scaler)")
            self._violate(
                "AMP005",
                f"scaler.{what}() after an unscaled loss.backward(): the gradients were never "
                f"multiplied by the scale, so they are divided by it ({self._scale_of(st)}) and the "
                f"update is that many times too small; use scaler.scale(loss).backward(){fresh}",
            )
        elif st.scaled_bw == 0 and unscaled_bw == 0 and st.n_updates > 0 and st.scaled_bw_before_update:
            loc = st.last_update_loc
            self._violate(
                "AMP007",
                f"scaler.update() ran between optimizers' steps: this scaler.{what}() uses gradients "
                f"scaled before that update, so they are unscaled with the wrong factor and the "
                f"scale moves twice per iteration; call scaler.update() once, after every "
                f"scaler.step()" + (f" (this {what} at %s:%d)" % _user_location() if loc else ""),
                loc,
            )

    @staticmethod
    def _scale_of(st: _ScalerState) -> str:
        s = st.ref()
        try:
            return f"scale {float(s.get_scale()):g}" if s is not None else "the scale"
        except Exception:
            return "the scale"

    def _unscale(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def unscale_(scaler: Any, optimizer: Any) -> Any:
            if not san._in_scaler_call:
                san._count(scaler, "unscale_")
            if not san._active or not san._enabled(scaler):
                return orig(scaler, optimizer)
            st = san._state(scaler)
            san.events.append("unscale_" if not san._in_scaler_call else "unscale_(in step)")
            if not san._in_scaler_call:
                san._pre_unscale_or_step(st, optimizer, "unscale_")
            san._in_scaler_call += 1
            try:
                out = orig(scaler, optimizer)
            finally:
                san._in_scaler_call -= 1
            st.unscaled_opts[id(optimizer)] = weakref.ref(optimizer)
            return out

        return unscale_

    def _step(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def step(scaler: Any, optimizer: Any, *a: Any, **k: Any) -> Any:
            san._count(scaler, "step")
            if not san._active or not san._enabled(scaler):
                return orig(scaler, optimizer, *a, **k)
            st = san._state(scaler)
            san.events.append("step")
            loc = _user_location()
            owner = san._opt_owner.get(id(optimizer))
            if owner is not None and owner is not st and owner.ref() is not None \
                    and id(optimizer) not in san._amp003_reported:
                san._amp003_reported.add(id(optimizer))
                if id(optimizer) in owner.stepped_opts:
                    msg = ("a second GradScaler steps an optimizer another GradScaler already stepped "
                           "this iteration: optimizer.step() runs twice and the second run sees "
                           "gradients unscaled twice; use one GradScaler (it can scale several losses)")
                else:
                    msg = ("this optimizer is stepped by more than one GradScaler: each keeps its own "
                           "scale and skip state; use a single GradScaler for it")
                san._violate("AMP003", msg)
            san._opt_owner[id(optimizer)] = st
            san._pre_unscale_or_step(st, optimizer, "step")
            san._in_step += 1
            san._in_scaler_call += 1
            try:
                out = orig(scaler, optimizer, *a, **k)
            finally:
                san._in_step -= 1
                san._in_scaler_call -= 1
            st.stepped_opts[id(optimizer)] = weakref.ref(optimizer)
            st.unscaled_opts.pop(id(optimizer), None)
            st.last_step_loc = loc
            st.activity_since_step = False
            return out

        return step

    def _update(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def update(scaler: Any, new_scale: Any = None) -> Any:
            san._count(scaler, "update")
            if not san._active or not san._enabled(scaler):
                return orig(scaler, new_scale)
            st = san._state(scaler)
            san.events.append("update")
            loc = _user_location()
            if not st.stepped_opts and new_scale is None:
                if st.n_updates > 0 and st.scaled_bw == 0:
                    msg = ("scaler.update() called twice with no scaler.step() in between; call it "
                           "once per iteration (torch raises 'No inf checks were recorded prior to "
                           "update.')")
                else:
                    msg = ("scaler.update() with no scaler.step() since the last update; the scale "
                           "only makes sense after scaler.step(optimizer)")
                san._violate("AMP007", msg, loc)
            out = orig(scaler, new_scale)
            st.scaled_bw_before_update = st.scaled_bw
            st.scaled_bw = 0
            st.unscaled_mark = san._n_unscaled_bw
            st.unscaled_opts.clear()
            st.stepped_opts.clear()
            st.last_update_loc = loc
            st.n_updates += 1
            st.missing_update_reported = False
            st.activity_since_step = False
            st.live = False
            for key in [k for k, (_, s) in san._scaled_nodes.items() if s is st]:
                del san._scaled_nodes[key]
            return out

        return update

    def _backward(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def backward(tensors: Any, *a: Any, **k: Any) -> Any:
            if not san._active:
                return orig(tensors, *a, **k)
            inside = [d for d in ("cpu", "cuda") if _autocast_on(d)]
            owner = san._scaled_owner(tensors)
            san.events.append("backward(scaled)" if owner else "backward")
            if inside:
                san._violate(
                    "AMP002",
                    f"backward() inside an enabled autocast region ({', '.join(inside)}); leave the "
                    f"`with torch.autocast(...)` block before calling backward (backward ops run "
                    f"in the dtype autocast chose for the forward anyway)",
                )
            if owner is not None:
                if owner.stepped_opts:
                    owner.activity_since_step = True
                    san._check_next_iteration(owner, "scale(...).backward")
            out = orig(tensors, *a, **k)
            san._n_backward += 1
            if owner is not None:
                san._n_scaled_backward += 1
                owner.scaled_bw += 1
                owner.live = True
            else:
                san._n_unscaled_bw += 1
            return out

        return backward

    def _total_norm(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def _get_total_norm(tensors: Any, *a: Any, **k: Any) -> Any:
            if san._active and not san._in_scaler_call:
                san.events.append("total_norm")
                grads = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
                tensors = grads
                for st in list(san._scalers.values()):
                    if not st.live or st.ref() is None or not san._enabled(st.ref()):
                        continue
                    unscaled_ptrs = set()
                    for r in st.unscaled_opts.values():
                        opt = r()
                        if opt is None:
                            continue
                        for g in opt.param_groups:
                            for p in g["params"]:
                                if p.grad is not None:
                                    unscaled_ptrs.add(p.grad.data_ptr())
                    if any(isinstance(t, torch.Tensor) and t.data_ptr() not in unscaled_ptrs
                           for t in grads):
                        san._violate(
                            "AMP006",
                            f"gradient norm computed (clip_grad_norm_) on scaled gradients: they are "
                            f"still multiplied by the loss scale ({san._scale_of(st)}), so the norm is "
                            f"that many times too big and clipping over-clips; call "
                            f"scaler.unscale_(optimizer) first",
                        )
                        break
            return orig(tensors, *a, **k)

        return _get_total_norm

    def _zero_grad(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def zero_grad(optimizer: Any, *a: Any, **k: Any) -> Any:
            if san._active:
                san.events.append("zero_grad")
                for st in san._scalers.values():
                    if st.live and id(optimizer) not in st.stepped_opts and st.ref() is not None:
                        san._violate(
                            "AMP009",
                            "optimizer.zero_grad() between scaler.scale(loss).backward() and "
                            "scaler.step(optimizer): the gradients are discarded before the step; "
                            "zero the gradients at the start of the iteration (or after update())",
                        )
                        break
            return orig(optimizer, *a, **k)

        return zero_grad

    def _opt_pre_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._active:
            return None
        self._n_opt_steps += 1
        self._unscaled_at_last_optstep = self._n_unscaled_bw
        if self._in_step:
            return None
        self.events.append("optimizer.step")
        for st in self._scalers.values():
            if st.live and st.ref() is not None and self._enabled(st.ref()):
                st.live = False  # these grads are consumed now; report each misuse once
                if id(optimizer) in st.unscaled_opts:
                    msg = ("optimizer.step() called directly after scaler.unscale_(): the inf/NaN "
                           "check is bypassed, so an overflowing step corrupts the parameters; "
                           "use scaler.step(optimizer)")
                else:
                    msg = (f"optimizer.step() called directly after scaler.scale(loss).backward(): "
                           f"the gradients are still multiplied by the loss scale "
                           f"({self._scale_of(st)}) and inf/NaN steps are not skipped; use "
                           f"scaler.step(optimizer)")
                self._violate("AMP004", msg)
                break
        return None

    def _autocast_enter(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def __enter__(ac: Any) -> Any:
            if san._active:
                san.events.append("autocast.__enter__")
                key = (str(getattr(ac, "device", "?")),
                       str(getattr(ac, "fast_dtype", "?")).replace("torch.", ""),
                       bool(getattr(ac, "_enabled", False)))
                san._autocast_counts[key] = san._autocast_counts.get(key, 0) + 1
            return orig(ac)

        return __enter__

    def _autocast_exit(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def __exit__(ac: Any, *a: Any) -> Any:
            if san._active:
                san.events.append("autocast.__exit__")
            return orig(ac, *a)

        return __exit__

    # ------------------------------------------------------------------ install / remove

    def _patch(self, owner: Any, name: str, factory: Callable[[Any], Any]) -> None:
        had = name in vars(owner)
        orig = getattr(owner, name)
        self._saved.append((owner, name, vars(owner).get(name, orig), had))
        setattr(owner, name, factory(orig))

    def _init(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        san = self

        def __init__(scaler: Any, *a: Any, **k: Any) -> None:
            if not san._active:
                return orig(scaler, *a, **k)
            loc = _user_location()
            # torch warns with stacklevel=2 ("CUDA is not available.  Disabling."): re-issue its
            # warnings at the user's line, not at this wrapper
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                orig(scaler, *a, **k)
            for w in caught:  # once per message and location, like Python's default action
                key = (str(w.message), w.category, loc)
                if key not in san._warned:
                    san._warned.add(key)
                    warnings.warn_explicit(w.message, w.category, loc[0], loc[1])
            requested = k.get("enabled", a[5] if len(a) > 5 else True)
            san._seen_info(scaler, requested=requested, loc=loc, created=True)

        return __init__

    def __enter__(self) -> "Sanitizer":
        if self._active:
            raise RuntimeError("this Sanitizer is already active")
        gs = torch.amp.GradScaler
        self._patch(gs, "__init__", self._init)
        self._patch(gs, "scale", self._scale)
        self._patch(gs, "unscale_", self._unscale)
        self._patch(gs, "step", self._step)
        self._patch(gs, "update", self._update)
        self._patch(torch.autograd, "backward", self._backward)
        if hasattr(_clip_grad, "_get_total_norm"):
            orig_tn = _clip_grad._get_total_norm
            self._patch(_clip_grad, "_get_total_norm", self._total_norm)
            if getattr(torch.nn.utils, "get_total_norm", None) is orig_tn:
                self._saved.append((torch.nn.utils, "get_total_norm", orig_tn, True))
                torch.nn.utils.get_total_norm = _clip_grad._get_total_norm
        else:  # older torch: clip_grad_norm_ computes the norm inline; catch the call itself
            self._patch(_clip_grad, "clip_grad_norm_", self._total_norm_clip)
            self._saved.append((torch.nn.utils, "clip_grad_norm_", torch.nn.utils.clip_grad_norm_, True))
            torch.nn.utils.clip_grad_norm_ = _clip_grad.clip_grad_norm_
        self._patch(_autocast_mode.autocast, "__enter__", self._autocast_enter)
        self._patch(_autocast_mode.autocast, "__exit__", self._autocast_exit)
        self._patch(torch.optim.Optimizer, "zero_grad", self._zero_grad)
        self._hook_handle = _optim_mod.register_optimizer_step_pre_hook(self._opt_pre_hook)
        self._active = True
        return self

    def _total_norm_clip(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        check = self._total_norm(lambda *a, **k: None)

        def clip_grad_norm_(parameters: Any, *a: Any, **k: Any) -> Any:
            params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            check([p.grad for p in params if p.grad is not None])
            return orig(params, *a, **k)

        return clip_grad_norm_

    def finish(self) -> None:
        """End-of-run checks (AMP001 for a scaler left stepped without update)."""
        for st in self._scalers.values():
            if st.stepped_opts and not st.missing_update_reported and st.ref() is not None:
                st.missing_update_reported = True
                self._violate(
                    "AMP001",
                    "scaler.step() was not followed by scaler.update() before the run ended; call "
                    "scaler.update() once per iteration after stepping",
                    st.last_step_loc,
                )

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None or not issubclass(exc_type, AmpViolation):
                raise_on = self.raise_on_violation
                self.raise_on_violation = False  # never raise from __exit__
                try:
                    self.finish()
                finally:
                    self.raise_on_violation = raise_on
        finally:
            self._active = False
            if self._hook_handle is not None:
                self._hook_handle.remove()
                self._hook_handle = None
            for owner, name, orig, had in reversed(self._saved):
                if had:
                    setattr(owner, name, orig)
                else:
                    try:
                        delattr(owner, name)
                    except AttributeError:
                        pass
            self._saved.clear()
        if self.report:
            print(self.summary(), file=self.stream or sys.stderr)


def _autocast_on(device: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device))
    except Exception:
        return False


@contextlib.contextmanager
def sanitize(*, raise_on_violation: bool = False, report: bool = True, stream: Any = None) -> Iterator[Sanitizer]:
    """``with sanitize() as s: train()`` then read ``s.violations``."""
    san = Sanitizer(raise_on_violation=raise_on_violation, report=report, stream=stream)
    with san:
        yield san


def measure_overhead(steps: int = 200, *, dtype: str = "float16", repeats: int = 3,
                     device: str = "cpu") -> dict[str, float]:
    """Time ``steps`` canonical AMP steps on the harness problem plain and traced.

    On CPU torch is pinned to 1 thread; on CUDA each timing is bracketed by
    ``torch.cuda.synchronize()``. Returns ``{"plain_s", "traced_s", "ratio"}`` (best of
    ``repeats`` for each).
    """
    from amplint.runtime import harness, reference

    dt = harness.resolve_dtype(dtype)
    dev = harness.resolve_device(device)

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    def once(traced: bool) -> float:
        x, y = harness.make_data(0, dev)
        model, opt = harness.make_model(0, dev)
        batches = harness.make_batches(x, y, steps)
        scaler = torch.amp.GradScaler(dev)
        ctx = sanitize(report=False) if traced else contextlib.nullcontext()
        sync()
        t0 = time.perf_counter()
        with ctx:
            reference.train_loop(model, batches, harness.loss_fn, opt, scaler, device_type=dev, dtype=dt)
        sync()
        return time.perf_counter() - t0

    with harness.cpu_threads(dev):
        once(False)
        once(True)  # warm-up
        plain = min(once(False) for _ in range(repeats))
        traced = min(once(True) for _ in range(repeats))
    return {"plain_s": plain, "traced_s": traced, "ratio": traced / plain if plain else float("nan")}
