"""Run a training loop on a tiny seeded problem and check that AMP behaves.

The problem (amp-facts §4): 256x8 inputs from a seeded ``torch.Generator``,
``y = tanh(x @ w) + 0.05 * noise``, a ``Linear(8,32)-ReLU-Linear(32,1)`` model seeded with
``torch.manual_seed(seed)``, ``SGD(lr=0.05, momentum=0.9)``, batches of 64 (cycling through the
4 batches in order), 50 steps, ``mse_loss``. Device ``cuda`` when available else ``cpu``;
fp16 by default (bf16 selectable). CPU checks pin ``torch.set_num_threads(1)`` and restore it.

The loop under test follows one of two contracts:

* per-iteration ``train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype)``
  (``batch`` is ``(x, y)``), called once per step; it should return the loss;
* whole loop ``train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype)``
  (``batches`` is a list of ``(x, y)``), called once; it should return the list of losses.
  Per-step scale and skip are observed through instance-level wrappers on the scaler
  (``get_scale()`` after each ``update``, parameters compared around each ``step``), removed
  afterwards.

Checks (by name):

``1_finishes``              all steps run, every loss and parameter is finite;
``2_loss_vs_fp32``          final loss (fp32, outside autocast, all 256 samples) within
                            ``0.05*fp32 + 1e-3`` of an fp32 run with the same seed;
``2b_learned``              final loss < 0.5 x the initial loss on the first batch;
``3_overflow_skip_backoff`` inf injected at step 5 through a parameter grad hook: step 5
                            skipped (parameters bitwise unchanged), scale x backoff_factor,
                            step 6 not skipped;
``4_growth``                ``init_scale=256, growth_interval=3``: scales after each of 7 steps
                            are exactly ``[256, 256, 512, 512, 512, 1024, 1024]``.

Checks 3 and 4 apply only when the loop uses the scaler (calls ``scale`` or ``step``);
otherwise they are reported as not applicable (``passed is None``). An exception raised by
the loop fails the check that ran it, with the exception text as its detail.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import itertools
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from amplint.runtime import reference

__all__ = [
    "Check", "DeviceUnavailable", "Report", "RunResult", "check_all", "compare_to_reference", "load_loops",
    "contract_of", "resolve_device", "resolve_dtype", "run_loop", "fp32_baseline",
    "N_SAMPLES", "BATCH", "STEPS", "RTOL", "ATOL", "INJECT_AT", "GROWTH_EXPECTED",
]

N_SAMPLES = 256
N_FEATURES = 8
HIDDEN = 32
BATCH = 64
STEPS = 50
LR = 0.05
MOMENTUM = 0.9
RTOL = 0.05
ATOL = 1e-3
INJECT_AT = 5
INJECT_STEPS = 12
GROWTH_INIT = 256.0
GROWTH_INTERVAL = 3
GROWTH_EXPECTED = [256.0, 256.0, 512.0, 512.0, 512.0, 1024.0, 1024.0]

CHECK_NAMES = ["1_finishes", "2_loss_vs_fp32", "2b_learned", "3_overflow_skip_backoff", "4_growth"]

_CONTRACT_PARAMS = ("model", None, "loss_fn", "optimizer", "scaler")


# --------------------------------------------------------------------------- results


class DeviceUnavailable(RuntimeError):
    """The requested device (``cuda``) is not available in this torch build/machine."""


@dataclass
class Check:
    name: str
    passed: bool | None  # None: not applicable
    detail: str
    figure: str = ""  # a short number for tables

    def __iter__(self) -> Iterator[Any]:  # allows ``name, passed, detail = check``
        return iter((self.name, self.passed, self.detail))


@dataclass
class Report:
    loop: str
    device: str
    dtype: str
    checks: list[Check] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)
    fp32_losses: list[float] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    growth_scales: list[float] = field(default_factory=list)
    inject_scales: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.passed is not False for c in self.checks)

    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.passed is False]

    def as_dict(self) -> dict[str, Any]:
        return {
            "loop": self.loop, "device": self.device, "dtype": self.dtype, "ok": self.ok,
            "checks": {c.name: {"passed": c.passed, "detail": c.detail, "figure": c.figure}
                       for c in self.checks},
        }

    def __str__(self) -> str:
        lines = [f"{self.loop} [{self.device} {self.dtype}] {'OK' if self.ok else 'FAILED'}"]
        for c in self.checks:
            mark = {True: "pass", False: "FAIL", None: "n/a"}[c.passed]
            lines.append(f"  {c.name:<26} {mark:<4} {c.detail}")
        return "\n".join(lines)


@dataclass
class RunResult:
    losses: list[float | None] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)  # get_scale() after each step/update
    skipped: list[bool] = field(default_factory=list)  # params bitwise unchanged over a step
    error: str | None = None
    used_scaler: bool = False
    n_scale_calls: int = 0
    n_step_calls: int = 0
    n_update_calls: int = 0
    final_eval: float = math.nan
    first_eval: float = math.nan
    params_finite: bool = True
    params: list[torch.Tensor] = field(default_factory=list)
    contract: str = "step"


# --------------------------------------------------------------------------- set-up helpers


def resolve_device(device: str | torch.device | None) -> str:
    if device is None or str(device) == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    if dtype is None:
        return torch.float16
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    try:
        return names[str(dtype).replace("torch.", "")]
    except KeyError:
        raise ValueError(f"unsupported AMP dtype {dtype!r}: use float16 or bfloat16") from None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@contextlib.contextmanager
def cpu_threads(device: str, n: int = 1) -> Iterator[None]:
    """Pin torch to ``n`` threads for CPU runs (10x faster for this tiny problem) and restore."""
    if device != "cpu":
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def make_data(seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N_SAMPLES, N_FEATURES, generator=g)
    w = torch.randn(N_FEATURES, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(N_SAMPLES, 1, generator=g)
    return x.to(device), y.to(device)


def make_model(seed: int, device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(N_FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    return model, opt


def make_batches(x: torch.Tensor, y: torch.Tensor, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    n = N_SAMPLES // BATCH
    return [(x[(i % n) * BATCH:(i % n + 1) * BATCH], y[(i % n) * BATCH:(i % n + 1) * BATCH])
            for i in range(steps)]


def loss_fn(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(pred, target)


@torch.no_grad()
def eval_fp32(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float(torch.nn.functional.mse_loss(model(x).float(), y.float()))


def _snapshot(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(u, v) for u, v in zip(a, b))


def _exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- contracts


def contract_of(fn: Callable[..., Any]) -> str | None:
    """'step', 'loop', or None when ``fn`` matches neither loop contract."""
    explicit = getattr(fn, "__amplint_contract__", None)
    if explicit in ("step", "loop"):
        return explicit
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = {p.name for p in params}
    has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    kw_ok = has_var_kw or {"device_type", "dtype"} <= names
    name = getattr(fn, "__name__", "")
    if len(positional) < 5 or not kw_ok:
        if name in ("train_step", "train_loop") and len(positional) >= 5:
            return "step" if name == "train_step" else "loop"
        return None
    second = positional[1].name
    if name == "train_loop" or second in ("batches", "loader", "data", "dataloader", "batch_list"):
        return "loop"
    if name == "train_step" or second == "batch":
        return "step"
    # Any other 5-positional function with device_type/dtype: require the documented names.
    expected = [n for n in _CONTRACT_PARAMS]
    if all(e is None or positional[i].name == e for i, e in enumerate(expected)):
        return "loop" if second.endswith("s") else "step"
    return None


_load_counter = itertools.count()


def _display_path(path: str | os.PathLike[str]) -> str:
    """The path as the user would name it: relative to the working directory when inside it."""
    rel = os.path.relpath(os.path.abspath(path))
    return rel if not rel.startswith("..") else os.fspath(path)


def load_loops(path: str | os.PathLike[str]) -> list[tuple[str, Callable[..., Any]]]:
    """Import the file at ``path`` (unique module name) and return its loop functions.

    Returns ``(name, fn)`` for every top-level function named ``train_step``/``train_loop`` or
    whose signature matches either contract, in source order. ``name`` is ``path/to/file.py:func`` (relative to the working directory).
    """
    path = os.fspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    modname = f"_amplint_loaded_{''.join(c if c.isalnum() else '_' for c in stem)}_{next(_load_counter)}"
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    found = []
    for attr, obj in vars(module).items():
        if not inspect.isfunction(obj) or obj.__module__ != modname or attr.startswith("_"):
            continue
        if attr in ("train_step", "train_loop") or contract_of(obj) is not None:
            line = obj.__code__.co_firstlineno
            found.append((line, f"{_display_path(path)}:{attr}", obj))
    found.sort(key=lambda t: t[0])
    return [(name, fn) for _, name, fn in found]


# --------------------------------------------------------------------------- running


class _Batches(list):
    """A list of batches that remembers which index the loop last took (for injection)."""

    current = -1

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            self.current = i
            yield list.__getitem__(self, i)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int):
            self.current = i if i >= 0 else len(self) + i
        return list.__getitem__(self, i)


@contextlib.contextmanager
def _observe_scaler(scaler: Any, model: torch.nn.Module, res: RunResult) -> Iterator[None]:
    """Instance-level wrappers counting calls; record scale after update and skip per step.

    The wrappers call the class's method at call time, so class-level patches (the sanitizer)
    still see the calls. They are deleted on exit, leaving the instance as it was.
    """
    cls = type(scaler)
    names = ("scale", "step", "update")
    had = {n: n in vars(scaler) for n in names}
    saved = {n: vars(scaler)[n] for n in names if had[n]}

    def scale(*a: Any, **k: Any) -> Any:
        res.n_scale_calls += 1
        return (saved.get("scale") or cls.scale.__get__(scaler))(*a, **k)

    def step(*a: Any, **k: Any) -> Any:
        res.n_step_calls += 1
        before = _snapshot(model)
        out = (saved.get("step") or cls.step.__get__(scaler))(*a, **k)
        if res.contract == "loop":
            res.skipped.append(_same(before, list(model.parameters())))
        return out

    def update(*a: Any, **k: Any) -> Any:
        res.n_update_calls += 1
        out = (saved.get("update") or cls.update.__get__(scaler))(*a, **k)
        if res.contract == "loop":
            res.scales.append(float(scaler.get_scale()))
        return out

    scaler.scale, scaler.step, scaler.update = scale, step, update
    try:
        yield
    finally:
        for n in names:
            if had[n]:
                setattr(scaler, n, saved[n])
            else:
                vars(scaler).pop(n, None)


def _as_float(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v.item() if isinstance(v, torch.Tensor) else v)
    except (TypeError, ValueError, RuntimeError):
        return None


def run_loop(
    fn: Callable[..., Any],
    *,
    seed: int = 0,
    device: str = "cpu",
    dtype: torch.dtype = torch.float16,
    steps: int = STEPS,
    scaler_kwargs: dict[str, Any] | None = None,
    inject_at: int | None = None,
    contract: str | None = None,
) -> RunResult:
    """Run ``fn`` on the seeded problem and observe losses, scales and skipped steps."""
    contract = contract or contract_of(fn) or "step"
    res = RunResult(contract=contract)
    x, y = make_data(seed, device)
    model, opt = make_model(seed, device)
    batches = _Batches(make_batches(x, y, steps))
    res.first_eval = eval_fp32(model, *batches[0])
    batches.current = -1
    scaler = torch.amp.GradScaler(device, **(scaler_kwargs or {}))
    state = {"inject": False}
    handle = None
    if inject_at is not None:
        first = next(model.parameters())

        def hook(g: torch.Tensor) -> torch.Tensor:
            active = state["inject"] if contract == "step" else batches.current == inject_at
            return torch.full_like(g, math.inf) if active else g

        handle = first.register_hook(hook)
    kw = {"device_type": device, "dtype": dtype}
    try:
        with _observe_scaler(scaler, model, res):
            if contract == "step":
                for i, batch in enumerate(batches):
                    state["inject"] = i == inject_at
                    before = _snapshot(model)
                    out = fn(model, batch, loss_fn, opt, scaler, **kw)
                    res.losses.append(_as_float(out))
                    res.skipped.append(_same(before, list(model.parameters())))
                    res.scales.append(float(scaler.get_scale()))
            else:
                out = fn(model, batches, loss_fn, opt, scaler, **kw)
                if out is not None:
                    try:
                        res.losses = [_as_float(v) for v in out]
                    except TypeError:
                        res.losses = [_as_float(out)]
    except Exception as exc:  # the loop under test failed: record, do not propagate
        res.error = _exc_text(exc)
        tb = traceback.extract_tb(exc.__traceback__)
        skip = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
                os.path.dirname(os.path.abspath(__file__)) + os.sep)
        user = [f for f in tb if not os.path.abspath(f.filename).startswith(skip)]
        if user:
            res.error += f" (at {user[-1].filename}:{user[-1].lineno})"
    finally:
        if handle is not None:
            handle.remove()
    res.used_scaler = res.n_scale_calls > 0 or res.n_step_calls > 0
    res.params = _snapshot(model)
    res.params_finite = all(bool(torch.isfinite(p).all()) for p in res.params)
    res.final_eval = eval_fp32(model, x, y)
    return res


def _fp32_step(model: torch.nn.Module, batch: Any, loss_fn: Any, optimizer: Any, scaler: Any,
               *, device_type: str, dtype: torch.dtype) -> float:
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


_fp32_cache: dict[tuple[int, str, int], RunResult] = {}


def fp32_baseline(seed: int = 0, device: str = "cpu", steps: int = STEPS) -> RunResult:
    """The fp32 run (no autocast, no scaler) with the same seed; cached per process."""
    key = (seed, device, steps)
    if key not in _fp32_cache:
        _fp32_cache[key] = run_loop(_fp32_step, seed=seed, device=device, dtype=torch.float32,
                                    steps=steps, contract="step")
    return _fp32_cache[key]


# --------------------------------------------------------------------------- checks


def _fmt(v: float | None) -> str:
    return "None" if v is None else f"{v:.6g}"


def _checks_main(res: RunResult, base: RunResult, steps: int) -> list[Check]:
    checks = []
    if res.error:
        checks.append(Check("1_finishes", False, f"raised {res.error}", "raised"))
        note = f"not run to the end: {res.error}"
        checks.append(Check("2_loss_vs_fp32", False, note, "-"))
        checks.append(Check("2b_learned", False, note, "-"))
        return checks
    losses = [v for v in res.losses if v is not None]
    finite = all(math.isfinite(v) for v in losses) and res.params_finite and math.isfinite(res.final_eval)
    if not res.losses:
        detail = "loop returned no losses; "
    elif len(losses) < len(res.losses):
        detail = f"{len(res.losses) - len(losses)} step(s) returned no loss; "
    else:
        detail = ""
    detail += (f"{len(losses)} losses, all finite" if finite else
               f"non-finite: losses={sum(not math.isfinite(v) for v in losses)} "
               f"params_finite={res.params_finite} final={_fmt(res.final_eval)}")
    checks.append(Check("1_finishes", finite, detail, f"{len(losses)} losses" if finite else "non-finite"))
    amp, ref = res.final_eval, base.final_eval
    rel = abs(amp - ref) / abs(ref) if ref else math.inf
    ok2 = math.isfinite(amp) and abs(amp - ref) <= RTOL * abs(ref) + ATOL
    checks.append(Check("2_loss_vs_fp32", ok2,
                        f"amp={amp:.6g} fp32={ref:.6g} rel={rel:.3g} rtol={RTOL} atol={ATOL}",
                        f"rel={rel:.3g}"))
    ok2b = math.isfinite(amp) and amp < 0.5 * res.first_eval
    checks.append(Check("2b_learned", ok2b,
                        f"final={amp:.6g} first-batch={res.first_eval:.6g} "
                        f"(needs final < 0.5*first = {0.5 * res.first_eval:.6g})",
                        f"{amp:.3g}/{res.first_eval:.3g}"))
    return checks


def _check_inject(res: RunResult, backoff: float) -> Check:
    name = "3_overflow_skip_backoff"
    if res.error:
        return Check(name, False, f"raised {res.error}", "raised")
    k = INJECT_AT
    sc, sk = res.scales, res.skipped
    if len(sc) <= k + 1 or len(sk) <= k + 1:
        return Check(name, False,
                     f"observed {len(sk)} scaler.step skip(s) and {len(sc)} scale(s) after update "
                     f"for {INJECT_STEPS} steps (scaler.step/update not called once per step?)",
                     "unobserved")
    ok = sk[k] and sc[k] == sc[k - 1] * backoff and not sk[k + 1]
    detail = (f"scales[{k - 1}:{k + 2}]={sc[k - 1:k + 2]} skipped[{k}]={sk[k]} "
              f"skipped[{k + 1}]={sk[k + 1]} backoff={backoff}")
    return Check(name, bool(ok), detail, f"{sc[k - 1]:g}->{sc[k]:g}" + ("" if sk[k] else " not skipped"))


def _check_growth(res: RunResult) -> Check:
    name = "4_growth"
    if res.error:
        return Check(name, False, f"raised {res.error}", "raised")
    ok = res.scales == GROWTH_EXPECTED
    return Check(name, ok, f"scales={res.scales} expected={GROWTH_EXPECTED}",
                 (f"{res.scales[0]:g}->{res.scales[-1]:g}" if res.scales else "none") + ("" if ok else " (bad)"))


def _loop_name(fn: Callable[..., Any]) -> str:
    mod = getattr(fn, "__module__", "") or ""
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return name if mod in ("", "__main__") or mod.startswith("_amplint_loaded_") else f"{mod}.{name}"


def check_all(
    fn: Callable[..., Any] | None = None,
    *,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    seed: int = 0,
    name: str | None = None,
    steps: int = STEPS,
) -> Report:
    """Run every check on ``fn`` (the reference :func:`train_loop` when None)."""
    fn = fn if fn is not None else reference.train_loop
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    if dev == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("device 'cuda' requested but torch.cuda.is_available() is False")
    report = Report(name or _loop_name(fn), dev, dtype_name(dt))
    with cpu_threads(dev):
        base = fp32_baseline(seed, dev, steps)
        res = run_loop(fn, seed=seed, device=dev, dtype=dt, steps=steps)
        report.fp32_losses = [v for v in base.losses if v is not None]
        report.losses = res.losses
        report.scales = res.scales
        report.checks.extend(_checks_main(res, base, steps))
        if res.used_scaler or res.error:
            inj = run_loop(fn, seed=seed, device=dev, dtype=dt, steps=INJECT_STEPS, inject_at=INJECT_AT)
            report.inject_scales = inj.scales
            report.checks.append(_check_inject(inj, 0.5))
            gro = run_loop(fn, seed=seed, device=dev, dtype=dt, steps=len(GROWTH_EXPECTED),
                           scaler_kwargs={"init_scale": GROWTH_INIT, "growth_interval": GROWTH_INTERVAL})
            report.growth_scales = gro.scales
            report.checks.append(_check_growth(gro))
        else:
            why = "n/a: the loop never calls scaler.scale() or scaler.step()"
            report.checks.append(Check("3_overflow_skip_backoff", None, why, "n/a"))
            report.checks.append(Check("4_growth", None, why, "n/a"))
    return report


# --------------------------------------------------------------------------- reference comparison

_CLIP_VARIANTS = (1.0, 0.5, 0.1, 2.0, 5.0, 10.0)


def _trajectory_equal(a: RunResult, b: RunResult, exact: bool) -> tuple[bool, str]:
    if a.error or b.error:
        return False, f"raised: {a.error or b.error}"
    la, lb = a.losses, b.losses
    if len(la) != len(lb):
        return False, f"{len(la)} losses vs reference {len(lb)}"
    if a.scales != b.scales:
        return False, f"scale trajectory differs: {a.scales[:8]}... vs reference {b.scales[:8]}..."
    if exact:
        diffs = [i for i, (u, v) in enumerate(zip(la, lb)) if u != v]
        same_params = _same(a.params, b.params)
        if diffs or not same_params:
            first = diffs[0] if diffs else None
            where = f"first differing loss at step {first}: {la[first]!r} vs {lb[first]!r}" if diffs else \
                "losses equal but final parameters differ"
            return False, where
        return True, f"bit-identical: {len(la)} losses, scales and final parameters"
    worst = max((abs(u - v) / max(abs(v), 1e-12) for u, v in zip(la, lb)
                 if u is not None and v is not None), default=0.0)
    return worst <= 1e-3, f"max relative loss difference {worst:.3g} (tolerance 1e-3)"


def compare_to_reference(
    fn: Callable[..., Any],
    *,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    seed: int = 0,
    steps: int = STEPS,
    exact: bool | None = None,
) -> tuple[bool, str]:
    """Do ``fn``'s losses, scale trajectory (and final parameters) match the reference loop?

    Bit for bit on CPU (reruns there are deterministic), within 1e-3 relative on CUDA. When
    the plain reference does not match, the reference with ``unscale_`` + ``clip_grad_norm_``
    at a few common ``max_norm`` values is tried, and the detail says which matched.
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    exact = dev == "cpu" if exact is None else exact
    with cpu_threads(dev):
        got = run_loop(fn, seed=seed, device=dev, dtype=dt, steps=steps)
        ref = run_loop(reference.train_loop, seed=seed, device=dev, dtype=dt, steps=steps)
        ok, detail = _trajectory_equal(got, ref, exact)
        if ok or got.error:
            return ok, detail
        for clip in _CLIP_VARIANTS:
            def clipped(model: Any, batches: Any, loss_fn: Any, optimizer: Any, scaler: Any, *,
                        device_type: str, dtype: torch.dtype, _clip: float = clip) -> list[float]:
                return reference.train_loop(model, batches, loss_fn, optimizer, scaler,
                                            device_type=device_type, dtype=dtype, clip=_clip)
            ref_c = run_loop(clipped, seed=seed, device=dev, dtype=dt, steps=steps, contract="loop")
            ok_c, detail_c = _trajectory_equal(got, ref_c, exact)
            if ok_c:
                return True, f"{detail_c} (reference with unscale_ + clip_grad_norm_(max_norm={clip}))"
    return False, detail
