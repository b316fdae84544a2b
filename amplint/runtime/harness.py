"""Run a training loop on a tiny seeded problem and check that AMP behaves.

The problem (amp-facts §4): 256x8 inputs from a seeded ``torch.Generator``,
``y = tanh(x @ w) + 0.05 * noise``, a ``Linear(8,32)-ReLU-Linear(32,1)`` model seeded with
``torch.manual_seed(seed)``, ``SGD(lr=0.05, momentum=0.9)``, batches of 64 (cycling through the
4 batches in order), one epoch of 50 batches, ``mse_loss``. Device ``cuda`` when available else
``cpu``; fp16 by default (bf16 selectable). CPU checks pin ``torch.set_num_threads(1)``.

What runs is an *invoker*: ``invoker(env, batch, index)`` with a ``kind`` (``"loop"``: called
once with the whole epoch in ``env.batches``; ``"step"``: called once per batch) and an
``n_optimizers``. :class:`amplint.runtime.roles.Plan` is the invoker ``amplint verify`` builds
from a user's function; a plain function following one of the two historical contracts is
wrapped by :class:`FnInvoker`:

* per-iteration ``train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype)``;
* whole loop ``train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype)``.

Everything is observed from outside the loop, while it runs, through class-level wrappers
(removed afterwards): every ``GradScaler``'s ``scale``/``step``/``update`` (the harness's scaler
or one the loop builds itself), the parameters after each ``update()`` (a step was skipped
when they did not change), the batch index of each update (so gradient accumulation over N
batches is recognised), ``clip_grad_norm_``'s ``max_norm``, the autocast regions entered
(device, dtype) and every call of the harness's loss function. On a CPU run, autocast regions
and GradScalers the loop hard-codes for ``"cuda"`` run on the CPU (noted in the report).

The observed :class:`LoopConfig` (accumulation interval, clipping, number of optimizers, autocast
dtype, whether a scaler is used) configures the reference the loop is compared with, and the
fp32 baseline of check 2 (the same loop without autocast and scaling).

Checks (by name):

``1_finishes``              all batches run, every loss and parameter is finite;
``2_loss_vs_fp32``          final loss (fp32, outside autocast, all 256 samples) within
                            ``0.05*fp32 + 1e-3`` of the fp32 reference configured like the loop;
``2b_learned``              final loss < 0.5 x the initial loss on the first batch;
``3_overflow_skip_backoff`` inf injected into every gradient during optimizer step 5 (all of its
                            micro-batches) through parameter grad hooks: step 5 skipped
                            (parameters bitwise unchanged), scale x 0.5, step 6 not skipped;
``4_growth``                ``init_scale=256, growth_interval=3``: scales after each of 7 optimizer
                            steps are exactly ``[256, 256, 512, 512, 512, 1024, 1024]``.

Checks 3 and 4 apply only when the loop uses a scaler; a float16 loop without one fails them
(nothing skips an overflowing step), a bfloat16 one reports them as not applicable. A failing
check's detail names the first step where the loop and the reference diverge, with the values
there.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import os
import shutil
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.nn.utils.clip_grad as _clip_grad
import torch.optim.optimizer as _optim_mod
from torch.amp import autocast_mode as _autocast_mode

from amplint.runtime import reference
from amplint.runtime.fit import Problem

__all__ = [
    "Check", "DeviceUnavailable", "Report", "RunResult", "LoopConfig", "Env", "FnInvoker",
    "check_all", "compare_to_reference", "load_loops", "contract_of", "resolve_device",
    "resolve_dtype", "run_loop", "fp32_baseline", "reference_invoker", "observed_config",
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
# torch.amp.GradScaler.__init__'s parameters, in order
_GS_PARAMS = ("device", "init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")


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
class LoopConfig:
    """How the loop under test trains, as observed: the reference is configured the same way."""

    accum: int = 1
    clip: float | None = None
    n_optimizers: int = 1
    dtype: torch.dtype | None = torch.float16  # the autocast dtype; None: no autocast
    scaler: bool = True
    flush: bool = False  # also steps at the last batch of the epoch (a partial accumulation)
    notes: list[str] = field(default_factory=list)

    def key(self) -> tuple[Any, ...]:
        return (self.accum, self.clip, self.n_optimizers, self.flush)

    def describe(self) -> str:
        parts = [f"{dtype_name(self.dtype)} autocast" if self.dtype is not None else "no autocast",
                 "GradScaler" if self.scaler else "no GradScaler"]
        if self.accum > 1:
            parts.append(f"accumulation over {self.accum} batches" + (" (+ a final partial step)" if self.flush else ""))
        if self.clip is not None:
            parts.append(f"unscale_ + clip_grad_norm_(max_norm={self.clip:g})")
        if self.n_optimizers > 1:
            parts.append(f"{self.n_optimizers} optimizers")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"accum": self.accum, "clip": self.clip, "n_optimizers": self.n_optimizers,
                "dtype": dtype_name(self.dtype) if self.dtype is not None else None,
                "scaler": self.scaler, "flush": self.flush, "notes": list(self.notes)}


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
    config: LoopConfig | None = None
    reference: tuple[bool, str] | None = None  # (same as the configured reference?, detail)
    notes: list[str] = field(default_factory=list)
    cannot: str | None = None  # cannot verify: the harness could not make the loop's contract hold
    problem: Problem | None = None

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
            "config": self.config.as_dict() if self.config else None,
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
    scales: list[float] = field(default_factory=list)  # the scaler's get_scale() after each update
    skipped: list[bool] = field(default_factory=list)  # params bitwise unchanged since the last update
    snaps: list[torch.Tensor] = field(default_factory=list)  # all params (flat) after each update
    update_batches: list[int] = field(default_factory=list)  # batch index at each update
    opt_snaps: list[torch.Tensor] = field(default_factory=list)  # params after each optimizer.step()
    opt_batches: list[int] = field(default_factory=list)
    loss_calls: list[tuple[int, float]] = field(default_factory=list)  # (batch index, loss_fn value)
    scaled_losses: list[tuple[int, float]] = field(default_factory=list)  # (batch index, what scale() got)
    error: str | None = None
    used_scaler: bool = False
    own_scaler: bool = False  # the scaler that drove the loop was built by the loop
    scaler_enabled: bool = True
    n_scale_calls: int = 0
    n_step_calls: int = 0
    n_update_calls: int = 0
    autocasts: list[tuple[str, Any, bool]] = field(default_factory=list)  # (device, dtype, enabled), unique
    clip_norms: list[float] = field(default_factory=list)
    translated: set[str] = field(default_factory=set)  # "autocast"/"GradScaler" moved from cuda to cpu
    batches_seen: int = 0
    final_eval: float = math.nan
    first_eval: float = math.nan
    params_finite: bool = True
    params: list[torch.Tensor] = field(default_factory=list)
    contract: str = "step"
    contract_issue: str | None = None  # the harness's data did not fit the loop (see _contract_issue)


# what torch says when the data a loop gets does not fit its model or loss (shape, dtype,
# class-index contract, batch structure): the harness's fault, not the loop's
_CONTRACT_TEXTS = (
    "using a target size", "target size", "must match the size of tensor", "expected scalar type",
    "expected scalar type long", "expected long", "expected floating point type for target", "0d or 1d target tensor expected",
    "multi-target not supported", "is out of bounds", "mat1 and mat2 shapes cannot be multiplied",
    "expected input batch_size", "given groups=", "expected 3d", "expected 4d", "expected 2d",
    "is invalid for input of size", "values to unpack", "dimension out of range",
    "result type float can't be cast to the desired output type long",
)


def _contract_issue(text: str) -> bool:
    low = text.lower()
    return any(t in low for t in _CONTRACT_TEXTS)


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


def dtype_name(dtype: torch.dtype | None) -> str:
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


_PROBLEM: list[Problem] = [Problem()]
# one sample's input shapes a dry probe tries on the loop's own model class: features, then images
PROBE_SHAPES: list[tuple[int, ...]] = [(N_FEATURES,), (1, 8, 8), (3, 8, 8), (1, 16, 16), (3, 16, 16),
                                       (1, 28, 28), (3, 32, 32)]


def probe_model(cls: Any, problem: Problem) -> tuple[Problem | None, str]:
    """A dry fp32 forward of the loop's model class ``cls()`` on CPU (no step): the first input
    shape of :data:`PROBE_SHAPES` it accepts and the output shape it gives, made into a problem
    whose targets fit ``problem``'s loss; ``(None, why)`` when it cannot be used."""
    name = getattr(cls, "__qualname__", str(cls))
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = cls()
    except Exception as exc:
        return None, f"{name}() cannot be built without arguments ({type(exc).__name__}: {exc})"
    if not isinstance(model, torch.nn.Module) or not any(True for _ in model.parameters()):
        return None, f"{name}() is not a torch.nn.Module with parameters"
    model.eval()
    for shape in PROBE_SHAPES:
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = model(torch.zeros(2, *shape))
        except Exception:
            continue
        if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != 2 or not out.is_floating_point():
            return None, f"{name}'s output on a (2, {', '.join(map(str, shape))}) input is not a batch of floats"
        per = tuple(out.shape[1:])
        import dataclasses

        kw: dict[str, Any] = {"in_shape": shape, "out_shape": per, "model_name": name,
                              "model_factory": cls}
        if problem.target == "classes":
            if len(per) != 1 or per[0] < 2:
                return None, f"{name} outputs {per} per sample: not class scores for {problem.loss_name}"
            kw["n_classes"] = per[0]
        elif per == ():
            kw["squeeze"] = True  # the model squeezes itself: 1-D targets
        elif per != (1,):
            return None, f"{name} outputs {per} per sample: the harness's targets are one value per sample"
        return dataclasses.replace(problem, **kw), ""
    return None, (f"{name} accepts none of the probed input shapes "
                  + ", ".join("(N, " + ", ".join(map(str, s)) + ")" for s in PROBE_SHAPES))


def current_problem() -> Problem:
    """The problem the harness builds its data, model output and loss from (see :mod:`fit`)."""
    return _PROBLEM[-1]


@contextlib.contextmanager
def use_problem(problem: Problem | None) -> Iterator[None]:
    """Run the harness on ``problem`` (None: the default regression problem) and restore."""
    _PROBLEM.append(problem or Problem())
    try:
        yield
    finally:
        _PROBLEM.pop()


def make_data(seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The seeded data set of the current problem: regression ``tanh(x @ w) + noise``, class
    indices ``argmax(x @ W)``, or binary labels ``x @ w > 0`` (as floats)."""
    pb = current_problem()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N_SAMPLES, *pb.in_shape, generator=g)
    xf = x.reshape(N_SAMPLES, -1)  # an image's pixels, as features
    nf = xf.shape[1]
    if pb.target == "classes":
        w = torch.randn(nf, pb.n_classes, generator=g)
        y = (xf @ w).argmax(dim=1)
    elif pb.target == "binary":
        w = torch.randn(nf, 1, generator=g)
        y = (xf @ w > 0).float()
    else:
        w = torch.randn(nf, 1, generator=g) / (nf / N_FEATURES) ** 0.5
        y = torch.tanh(xf @ w) + 0.05 * torch.randn(N_SAMPLES, 1, generator=g)
    if pb.squeeze and pb.target != "classes":
        y = y.reshape(-1).contiguous()
    return x.to(device), y.to(device)


def tiny_model(device: str) -> torch.nn.Module:
    """The bundled model, ``Linear(8,32)-ReLU-Linear(32,out)`` (out: the number of classes, or 1),
    or the loop's own model class when the problem was fitted to it (built after the same seed)."""
    if current_problem().model_factory is not None:
        return current_problem().model_factory().to(device)
    return torch.nn.Sequential(
        torch.nn.Linear(N_FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, current_problem().out_dim)
    ).to(device)


def make_optimizers(model: torch.nn.Module, n: int = 1) -> list[torch.optim.Optimizer]:
    """``n`` SGD optimizers over consecutive slices of the model's parameters (one: all), or
    the script's own optimizer class and settings when the problem carries them.

    SGD (and every class optim_spec accepts) is per-parameter, so any split trains exactly like one optimizer over everything.
    """
    params = list(model.parameters())
    n = max(1, min(n, len(params)))
    bounds = [round(i * len(params) / n) for i in range(n + 1)]
    spec = current_problem().optimizer  # the script's own optimizer settings (verify checked them)
    if spec is not None:
        return [spec.build(params[bounds[i]:bounds[i + 1]], LR) for i in range(n)]
    return [torch.optim.SGD(params[bounds[i]:bounds[i + 1]], lr=LR, momentum=MOMENTUM) for i in range(n)]


def make_model(seed: int, device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = tiny_model(device)
    return model, make_optimizers(model, 1)[0]


def make_batches(x: torch.Tensor, y: torch.Tensor, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    n = N_SAMPLES // BATCH
    return [(x[(i % n) * BATCH:(i % n + 1) * BATCH], y[(i % n) * BATCH:(i % n + 1) * BATCH])
            for i in range(steps)]


def loss_fn(pred: torch.Tensor, target: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
    """The current problem's loss: ``mse_loss``, ``cross_entropy`` or
    ``binary_cross_entropy_with_logits``."""
    F = torch.nn.functional
    target_kind = current_problem().target
    if target_kind == "classes":
        return F.cross_entropy(pred, target, *a, **k)
    if target_kind == "binary":
        return F.binary_cross_entropy_with_logits(pred, target, *a, **k)
    return F.mse_loss(pred, target, *a, **k)


def _fit_output(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The model output reshaped like the loop does (``squeeze(-1)``) when the targets are 1-D."""
    if current_problem().target != "classes" and pred.shape != target.shape and pred.numel() == target.numel():
        return pred.reshape(target.shape)
    return pred


@torch.no_grad()
def eval_fp32(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """The problem's loss of ``model`` on (x, y) in fp32, outside autocast (a copy is cast to fp32 when the
    loop turned the model's parameters into fp16/bf16, e.g. with ``model.half()``)."""
    if any(p.dtype != torch.float32 for p in model.parameters()):
        model = copy.deepcopy(model).float()
    try:
        pred = model(x.float()).float()
        return float(loss_fn(_fit_output(pred, y), y if current_problem().target == "classes" else y.float()))
    except Exception:  # the loop left the model unusable: report it as not finite
        return math.nan


def _snapshot(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).float() for p in model.parameters()]).cpu()


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(u, v) for u, v in zip(a, b))


def _exc_text(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit: the loop called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- invokers


class _Batches(list):
    """A list of batches that remembers which index the loop last took (for injection).

    ``batch_size`` and ``dataset`` are there for loops that read them off a DataLoader.
    """

    current = -1
    batch_size = BATCH

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            self.current = i
            self.seen = max(getattr(self, "seen", 0), i + 1)
            yield list.__getitem__(self, i)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int):
            self.current = i if i >= 0 else len(self) + i
            self.seen = max(getattr(self, "seen", 0), self.current + 1)
        return list.__getitem__(self, i)

    @property
    def dataset(self) -> Any:
        xs = torch.cat([b[0] for b in list.__iter__(self)])
        ys = torch.cat([b[1] for b in list.__iter__(self)])
        return torch.utils.data.TensorDataset(xs, ys)


class Env:
    """The harness objects of one run, handed to an invoker."""

    def __init__(self, model: torch.nn.Module, optimizers: list[torch.optim.Optimizer], scaler: Any,
                 batches: _Batches, loss: Callable[..., Any], device: str, dtype: torch.dtype) -> None:
        self.model = model
        self.optimizers = optimizers
        self.scaler = scaler
        self.batches = batches
        self.loss_fn = loss
        self.device = device
        self.dtype = dtype
        self.cache: dict[Any, Any] = {}
        self.current_batch: Any = None
        self.current_index: int | None = None
        self._tmp: str | None = None

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.optimizers[0]

    def constant_scheduler(self) -> Any:
        return torch.optim.lr_scheduler.LambdaLR(self.optimizers[0], lambda _epoch: 1.0)

    def temp_path(self, name: str, is_dir: bool) -> str:
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="amplint-verify-")
        p = os.path.join(self._tmp, name)
        if is_dir:
            os.makedirs(p, exist_ok=True)
        return p

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


class FnInvoker:
    """A function following one of the two historical contracts (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], kind: str | None = None, n_optimizers: int = 1) -> None:
        self.fn = fn
        self.kind = kind or contract_of(fn) or "step"
        self.n_optimizers = n_optimizers
        self.__name__ = getattr(fn, "__name__", "loop")

    def __call__(self, env: Env, batch: Any = None, index: int | None = None) -> Any:
        opt: Any = env.optimizers[0] if self.n_optimizers == 1 else list(env.optimizers)
        kw = {"device_type": env.device, "dtype": env.dtype}
        if self.kind == "step":
            return self.fn(env.model, batch, env.loss_fn, opt, env.scaler, **kw)
        return self.fn(env.model, env.batches, env.loss_fn, opt, env.scaler, **kw)


def _as_invoker(fn: Any, contract: str | None = None) -> Any:
    if isinstance(fn, FnInvoker) or (callable(fn) and hasattr(fn, "kind") and hasattr(fn, "n_optimizers")):
        return fn
    return FnInvoker(fn, contract)


def reference_invoker(cfg: LoopConfig, *, amp: bool = True) -> FnInvoker:
    """The reference loop configured like ``cfg`` (``amp=False``: the fp32 version)."""

    def ref(model: Any, batches: Any, loss: Any, optimizer: Any, scaler: Any, *, device_type: str,
            dtype: torch.dtype) -> list[float]:
        if current_problem().squeeze:  # the loop reshapes the output to the 1-D targets: so does the reference
            inner = loss

            def loss(pred: Any, target: Any) -> Any:
                return inner(_fit_output(pred, target), target)
        return reference.train_loop(
            model, batches, loss, optimizer, scaler, device_type=device_type,
            dtype=(cfg.dtype or dtype) if amp else dtype, clip=cfg.clip, accum_steps=cfg.accum,
            autocast=amp and cfg.dtype is not None, flush=cfg.flush)

    ref.__name__ = "reference"
    return FnInvoker(ref, "loop", cfg.n_optimizers)


def contract_of(fn: Callable[..., Any]) -> str | None:
    """'step', 'loop', or None when ``fn`` matches neither historical contract."""
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
    expected = [n for n in _CONTRACT_PARAMS]
    if all(e is None or positional[i].name == e for i, e in enumerate(expected)):
        return "loop" if second.endswith("s") else "step"
    return None


def _display_path(path: str | os.PathLike[str]) -> str:
    """The path as the user would name it: relative to the working directory when inside it."""
    rel = os.path.relpath(os.path.abspath(path))
    return rel if not rel.startswith("..") else os.fspath(path)


def load_loops(path: str | os.PathLike[str]) -> list[tuple[str, Any]]:
    """The training functions ``amplint verify`` would run in ``path``, as ``(name, invoker)``.

    The file's definitions are loaded without running its top-level code
    (:mod:`amplint.runtime.loader`); functions that cannot be mapped to the harness are left out
    (``amplint verify`` reports them). ``name`` is ``path/to/file.py:qualname``.
    """
    from amplint.runtime import discover

    found = discover.discover(path)
    return [(t.plan.display, t.plan) for t in found.to_run]


# --------------------------------------------------------------------------- observation


class _ScalerTrace:
    __slots__ = ("scaler", "own", "enabled", "n_scale", "n_step", "n_update", "scales", "skipped",
                 "snaps", "update_batches", "prev")

    def __init__(self, scaler: Any, own: bool, prev: torch.Tensor) -> None:
        self.scaler = scaler
        self.own = own
        self.enabled = bool(getattr(scaler, "_enabled", True))
        self.n_scale = self.n_step = self.n_update = 0
        self.scales: list[float] = []
        self.skipped: list[bool] = []
        self.snaps: list[torch.Tensor] = []
        self.update_batches: list[int] = []
        self.prev = prev


@contextlib.contextmanager
def _observe(res: RunResult, env: Env, batch_index: Callable[[], int], *,
             force_scaler: dict[str, Any] | None, translate: bool) -> Iterator[dict[int, _ScalerTrace]]:
    """Class-level wrappers (chained on whatever is installed, e.g. the sanitizer's) for the
    duration of one run; restored on exit."""
    gs = torch.amp.GradScaler
    ac = _autocast_mode.autocast
    traces: dict[int, _ScalerTrace] = {}
    start = _flat(env.model)
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        orig = owner.__dict__[name]
        saved.append((owner, name, orig))
        setattr(owner, name, make(orig))

    def trace_of(scaler: Any) -> _ScalerTrace:
        t = traces.get(id(scaler))
        if t is None or t.scaler is not scaler:
            t = _ScalerTrace(scaler, scaler is not env.scaler, start)
            traces[id(scaler)] = t
        return t

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *a: Any, **k: Any) -> None:
            if len(a) > len(_GS_PARAMS):
                return orig(self, *a, **k)
            kw = dict(zip(_GS_PARAMS, a))
            if set(kw) & set(k):
                return orig(self, *a, **k)  # torch's own error for a doubled argument
            kw.update(k)
            if translate and kw.get("device", "cuda") == "cuda" and env.device == "cpu":
                kw["device"] = "cpu"
                res.translated.add("GradScaler")
            if force_scaler:
                kw.update(force_scaler)
            orig(self, **kw)
        return __init__

    def make_scale(orig: Any) -> Any:
        def scale(self: Any, outputs: Any, *a: Any, **k: Any) -> Any:
            t = trace_of(self)
            t.n_scale += 1
            if isinstance(outputs, torch.Tensor) and outputs.dim() == 0:
                v = _as_float(outputs.detach())
                if v is not None:
                    res.scaled_losses.append((batch_index(), v))
            return orig(self, outputs, *a, **k)
        return scale

    def make_step(orig: Any) -> Any:
        def step(self: Any, optimizer: Any, *a: Any, **k: Any) -> Any:
            t = trace_of(self)
            t.n_step += 1
            return orig(self, optimizer, *a, **k)
        return step

    def make_update(orig: Any) -> Any:
        def update(self: Any, *a: Any, **k: Any) -> Any:
            t = trace_of(self)
            t.n_update += 1
            out = orig(self, *a, **k)
            if t.enabled:
                snap = _flat(env.model)
                t.scales.append(float(self.get_scale()))
                t.skipped.append(bool(torch.equal(snap, t.prev)))
                t.snaps.append(snap)
                t.update_batches.append(batch_index())
                t.prev = snap
            return out
        return update

    def make_ac_init(orig: Any) -> Any:
        def __init__(self: Any, *a: Any, **k: Any) -> None:
            a = list(a)
            dev = a[0] if a else k.get("device_type")
            if translate and dev == "cuda" and env.device == "cpu":
                if a:
                    a[0] = "cpu"
                else:
                    k["device_type"] = "cpu"
                if len(a) < 2 and k.get("dtype") is None:
                    k["dtype"] = torch.float16  # what CUDA autocast defaults to
                res.translated.add("autocast")
            orig(self, *a, **k)  # a missing device_type raises torch's own TypeError
        return __init__

    def make_ac_enter(orig: Any) -> Any:
        def __enter__(self: Any) -> Any:
            entry = (str(getattr(self, "device", "?")), getattr(self, "fast_dtype", None),
                     bool(getattr(self, "_enabled", False)))
            if entry not in res.autocasts:
                res.autocasts.append(entry)
            return orig(self)
        return __enter__

    def make_clip(orig: Any) -> Any:
        def _clip_grads_with_norm_(parameters: Any, max_norm: Any, *a: Any, **k: Any) -> Any:
            try:
                res.clip_norms.append(float(max_norm))
            except (TypeError, ValueError):
                pass
            return orig(parameters, max_norm, *a, **k)
        return _clip_grads_with_norm_

    opt_ids = {id(o) for o in env.optimizers}

    def post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if id(optimizer) in opt_ids:
            res.opt_snaps.append(_flat(env.model))
            res.opt_batches.append(batch_index())

    patch(gs, "__init__", make_init)
    patch(gs, "scale", make_scale)
    patch(gs, "step", make_step)
    patch(gs, "update", make_update)
    patch(ac, "__init__", make_ac_init)
    patch(ac, "__enter__", make_ac_enter)
    if "_clip_grads_with_norm_" in _clip_grad.__dict__:
        patch(_clip_grad, "_clip_grads_with_norm_", make_clip)
    handle = _optim_mod.register_optimizer_step_post_hook(post_hook)
    try:
        yield traces
    finally:
        handle.remove()
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)


def _as_float(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v.item() if isinstance(v, torch.Tensor) else v)
    except (TypeError, ValueError, RuntimeError):
        return None


def run_loop(
    fn: Any,
    *,
    seed: int = 0,
    device: str = "cpu",
    dtype: torch.dtype = torch.float16,
    steps: int = STEPS,
    scaler_kwargs: dict[str, Any] | None = None,
    inject_at: int | None = None,
    accum: int = 1,
    contract: str | None = None,
    translate: bool = True,
) -> RunResult:
    """Run ``fn`` (an invoker or a contract function) on ``steps`` seeded batches and observe it.

    ``inject_at=k`` makes every gradient inf during optimizer step ``k``, i.e. during batches
    ``k*accum .. k*accum+accum-1``. ``scaler_kwargs`` go to the harness's scaler and to any
    scaler the loop builds itself.
    """
    inv = _as_invoker(fn, contract)
    res = RunResult(contract=inv.kind)
    x, y = make_data(seed, device)
    torch.manual_seed(seed)
    model = tiny_model(device)
    opts = make_optimizers(model, getattr(inv, "n_optimizers", 1))
    batches = _Batches(make_batches(x, y, steps))
    res.first_eval = eval_fp32(model, *batches[0])
    batches.current = -1
    batches.seen = 0
    kwargs = dict(scaler_kwargs or {})
    scaler = torch.amp.GradScaler(device, **kwargs)

    def batch_index() -> int:
        return batches.current

    def recording_loss(pred: torch.Tensor, target: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
        out = loss_fn(pred, target, *a, **k)
        v = _as_float(out.detach()) if isinstance(out, torch.Tensor) else None
        if v is not None:
            res.loss_calls.append((batch_index(), v))
        return out

    env = Env(model, opts, scaler, batches, recording_loss, device, dtype)
    handles = []
    if inject_at is not None:
        window = range(inject_at * accum, inject_at * accum + accum)

        def hook(g: torch.Tensor) -> torch.Tensor:
            return torch.full_like(g, math.inf) if batch_index() in window else g

        for o in opts:
            handles.append(o.param_groups[0]["params"][0].register_hook(hook))
    returned: list[float | None] = []
    traces: dict[int, _ScalerTrace] = {}
    force = {k: v for k, v in kwargs.items() if k in ("init_scale", "growth_interval")} or None
    caught: list[warnings.WarningMessage] = []
    try:
        with _observe(res, env, batch_index, force_scaler=force, translate=translate) as traces, \
                contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if inv.kind == "step":
                for i, batch in enumerate(batches):
                    returned.append(_as_float(inv(env, batch, i)))
            else:
                out = inv(env)
                if out is not None:
                    try:
                        returned = [_as_float(v) for v in out]
                    except TypeError:
                        returned = [_as_float(out)]
    except (Exception, SystemExit) as exc:  # the loop under test failed: record, do not propagate
        res.error = _exc_text(exc)
        tb = traceback.extract_tb(exc.__traceback__)
        skip = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
                os.path.dirname(os.path.abspath(__file__)) + os.sep)
        user = [f for f in tb if not os.path.abspath(f.filename).startswith(skip)]
        if user:
            res.error += f" (at {user[-1].filename}:{user[-1].lineno})"
        if _contract_issue(str(exc)):
            res.contract_issue = res.error
    finally:
        for h in handles:
            h.remove()
        env.close()
    for w in caught:  # a broadcasting loss is the harness's data not fitting; others pass through
        text = str(w.message)
        if res.contract_issue is None and _contract_issue(text):
            res.contract_issue = f"{w.category.__name__}: {text.strip()} (at {w.filename}:{w.lineno})"
        elif not _contract_issue(text):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    res.batches_seen = getattr(batches, "seen", 0)
    # the scaler that drove the loop: the harness's when the loop used it, else the first of its own
    used = [t for t in traces.values() if t.n_scale or t.n_step or t.n_update]
    primary = next((t for t in used if not t.own), None) or (used[0] if used else None)
    if primary is not None:
        res.used_scaler = primary.enabled and (primary.n_scale > 0 or primary.n_step > 0)
        res.own_scaler = primary.own
        res.scaler_enabled = primary.enabled
        res.n_scale_calls, res.n_step_calls, res.n_update_calls = primary.n_scale, primary.n_step, primary.n_update
        res.scales, res.skipped, res.snaps = primary.scales, primary.skipped, primary.snaps
        res.update_batches = primary.update_batches
    def per_batch(pairs: list[tuple[int, float]]) -> list[float | None]:
        by: dict[int, list[float]] = {}
        for i, v in pairs:
            by.setdefault(i, []).append(v)
        return [sum(v) / len(v) for _, v in sorted(by.items())]

    # the harness loss function's values per batch; else what the loop returned; else what it
    # passed to scaler.scale() (a loss it computed itself, maybe divided by the accumulation)
    if res.loss_calls:
        res.losses = per_batch(res.loss_calls)
    elif any(v is not None for v in returned):
        res.losses = returned
    elif res.scaled_losses:
        res.losses = per_batch(res.scaled_losses)
    else:
        res.losses = returned
    res.params = _snapshot(model)
    res.params_finite = all(bool(torch.isfinite(p).all()) for p in res.params)
    res.final_eval = eval_fp32(model, x, y)
    return res


def observed_config(res: RunResult, n_optimizers: int = 1, device: str = "cpu",
                    requested: torch.dtype | None = None) -> LoopConfig:
    """What the run showed about the loop (see :class:`LoopConfig`)."""
    cfg = LoopConfig(n_optimizers=n_optimizers)
    cfg.scaler = res.used_scaler
    on_device = [(d, t) for d, t, enabled in res.autocasts if enabled and d == device]
    cfg.dtype = on_device[0][1] if on_device else None
    if len({t for _, t in on_device}) > 1:
        cfg.notes.append("the loop enters autocast with several dtypes: "
                         + ", ".join(dtype_name(t) for _, t in on_device))
    if not on_device and res.autocasts:
        devs = sorted({d for d, _, _ in res.autocasts})
        cfg.notes.append(f"the loop's autocast regions ({', '.join(devs)}) were disabled on this {device} run")
    if requested is not None and cfg.dtype is not None and cfg.dtype != requested:
        cfg.notes.append(f"the loop's autocast uses {dtype_name(cfg.dtype)} (not the requested "
                         f"{dtype_name(requested)})")
    marks = res.update_batches if res.used_scaler else sorted(set(res.opt_batches))
    if marks:
        n = marks[0] + 1
        gaps = [b - a for a, b in zip(marks, marks[1:])]
        if n >= 1 and all(g == n for g in gaps):
            cfg.accum = n
        elif n >= 1 and gaps and all(g == n for g in gaps[:-1]) and 0 < gaps[-1] < n and \
                marks[-1] == res.batches_seen - 1:
            cfg.accum, cfg.flush = n, True
        else:
            cfg.notes.append(f"irregular optimizer steps (after batches {marks[:6]}...): compared as one "
                             f"step per batch")
    if res.clip_norms:
        cfg.clip = res.clip_norms[0]
        if len(set(res.clip_norms)) > 1:
            cfg.notes.append(f"clip_grad_norm_ with several max_norm values {sorted(set(res.clip_norms))}")
    return cfg


_fp32_cache: dict[tuple[Any, ...], RunResult] = {}


def fp32_baseline(seed: int = 0, device: str = "cpu", steps: int = STEPS,
                  config: LoopConfig | None = None) -> RunResult:
    """The fp32 run (no autocast, a disabled scaler) of the reference configured like ``config``
    (accumulation, clipping, optimizers), with the same seed; cached per process."""
    cfg = config or LoopConfig()
    key = (seed, device, steps, cfg.key(), current_problem().key())
    if key not in _fp32_cache:
        _fp32_cache[key] = run_loop(reference_invoker(cfg, amp=False), seed=seed, device=device,
                                    dtype=torch.float32, steps=steps, scaler_kwargs={"enabled": False})
    return _fp32_cache[key]


# --------------------------------------------------------------------------- checks


def _fmt(v: float | None) -> str:
    return "None" if v is None else f"{v:.6g}"


def _checks_main(res: RunResult, base: RunResult) -> list[Check]:
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
        detail = ("no losses observed (the loop used neither the harness loss function nor scaler.scale(), "
                  "and returned none); ")
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


def _check_inject(res: RunResult, backoff: float, accum: int) -> Check:
    name = "3_overflow_skip_backoff"
    if res.error:
        return Check(name, False, f"raised {res.error}", "raised")
    k = INJECT_AT
    sc, sk = res.scales, res.skipped
    if len(sc) != INJECT_STEPS:
        return Check(name, False,
                     f"observed {len(sc)} scaler.update() call(s) for {INJECT_STEPS} optimizer steps "
                     f"({INJECT_STEPS * accum} batches): expected one per optimizer step",
                     "unobserved" if len(sc) < INJECT_STEPS else f"{len(sc)} updates")
    ok = sk[k] and sc[k] == sc[k - 1] * backoff and not sk[k + 1]
    detail = (f"scales[{k - 1}:{k + 2}]={sc[k - 1:k + 2]} skipped[{k}]={sk[k]} "
              f"skipped[{k + 1}]={sk[k + 1]} backoff={backoff}")
    return Check(name, bool(ok), detail, f"{sc[k - 1]:g}->{sc[k]:g}" + ("" if sk[k] else " not skipped"))


def _check_growth(res: RunResult) -> Check:
    name = "4_growth"
    if res.error:
        return Check(name, False, f"raised {res.error}", "raised")
    ok = res.scales == GROWTH_EXPECTED
    detail = f"scales={res.scales} expected={GROWTH_EXPECTED}"
    if len(res.scales) != len(GROWTH_EXPECTED):
        detail += (f"; {len(res.scales)} scaler.update() call(s) for {len(GROWTH_EXPECTED)} optimizer steps "
                   f"(expected one per step)")
    elif not ok:
        i = next((i for i, (a, b) in enumerate(zip(res.scales, GROWTH_EXPECTED)) if a != b),
                 min(len(res.scales), len(GROWTH_EXPECTED)))
        got = res.scales[i] if i < len(res.scales) else "none"
        want = GROWTH_EXPECTED[i] if i < len(GROWTH_EXPECTED) else "none"
        detail += f"; first difference after optimizer step {i}: scale {got} (expected {want})"
    return Check(name, ok, detail,
                 (f"{res.scales[0]:g}->{res.scales[-1]:g}" if res.scales else "none") + ("" if ok else " (bad)"))


def _loop_name(fn: Any) -> str:
    if hasattr(fn, "display"):
        return fn.display
    fn = getattr(fn, "fn", fn)
    mod = getattr(fn, "__module__", "") or ""
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return name if mod in ("", "__main__") or mod.startswith("_amplint_loaded_") else f"{mod}.{name}"


def check_all(
    fn: Any = None,
    *,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    seed: int = 0,
    name: str | None = None,
    steps: int = STEPS,
    compare: bool = False,
) -> Report:
    """Run every check on ``fn`` (an invoker, a contract function, or None: the reference).

    With ``compare=True`` the report also says whether the loop matches the reference
    configured like it (``report.reference``).
    """
    fn = fn if fn is not None else reference.train_loop
    inv = _as_invoker(fn)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    if dev == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("device 'cuda' requested but torch.cuda.is_available() is False")
    report = Report(name or _loop_name(fn), dev, dtype_name(dt))
    with cpu_threads(dev):
        res = run_loop(inv, seed=seed, device=dev, dtype=dt, steps=steps)
        cfg = observed_config(res, getattr(inv, "n_optimizers", 1), dev, dt)
        report.config = cfg
        report.problem = current_problem()
        if res.contract_issue:
            report.cannot = (f"the harness's data ({current_problem().describe()}) does not fit the loop: "
                             f"{res.contract_issue}")
            for name in CHECK_NAMES:
                report.checks.append(Check(name, None, "not run: cannot verify", "-"))
            return report
        if res.translated:
            report.notes.append(f"the loop's {' and '.join(sorted(res.translated))} for 'cuda' ran on cpu "
                                f"(no CUDA here)")
        report.notes.extend(cfg.notes)
        base = fp32_baseline(seed, dev, steps, cfg)
        report.fp32_losses = [v for v in base.losses if v is not None]
        report.losses = res.losses
        report.scales = res.scales
        report.checks.extend(_checks_main(res, base))
        if not res.error and res.autocasts and cfg.dtype is None:
            report.checks[0] = Check("1_finishes", False,
                                     "the loop ran without mixed precision: " + "; ".join(cfg.notes),
                                     "no AMP")
        ref_runs: dict[str, RunResult] = {}

        def ref_run(kind: str) -> RunResult:
            if kind not in ref_runs:
                rinv = reference_invoker(cfg)
                if kind == "main":
                    ref_runs[kind] = run_loop(rinv, seed=seed, device=dev, dtype=dt, steps=steps,
                                              scaler_kwargs=None if cfg.scaler else {"enabled": False})
                elif kind == "inject":
                    ref_runs[kind] = run_loop(rinv, seed=seed, device=dev, dtype=dt,
                                              steps=INJECT_STEPS * cfg.accum, inject_at=INJECT_AT,
                                              accum=cfg.accum)
                else:
                    ref_runs[kind] = run_loop(rinv, seed=seed, device=dev, dtype=dt,
                                              steps=len(GROWTH_EXPECTED) * cfg.accum,
                                              scaler_kwargs={"init_scale": GROWTH_INIT,
                                                             "growth_interval": GROWTH_INTERVAL})
            return ref_runs[kind]

        exact = dev == "cpu"
        if res.used_scaler or res.error:
            inj = run_loop(inv, seed=seed, device=dev, dtype=dt, steps=INJECT_STEPS * cfg.accum,
                           inject_at=INJECT_AT, accum=cfg.accum)
            report.inject_scales = inj.scales
            c3 = _check_inject(inj, 0.5, cfg.accum)
            if c3.passed is False and not inj.error:
                c3.detail += "; " + _compare_runs(inj, ref_run("inject"), exact)[1]
            report.checks.append(c3)
            gro = run_loop(inv, seed=seed, device=dev, dtype=dt, steps=len(GROWTH_EXPECTED) * cfg.accum,
                           scaler_kwargs={"init_scale": GROWTH_INIT, "growth_interval": GROWTH_INTERVAL})
            report.growth_scales = gro.scales
            report.checks.append(_check_growth(gro))
        elif cfg.dtype == torch.float16:
            why = ("float16 autocast without a GradScaler: nothing skips an overflowing step or backs "
                   "the scale off, and small gradients underflow to zero (use torch.amp.GradScaler)")
            report.checks.append(Check("3_overflow_skip_backoff", False, why, "no scaler"))
            report.checks.append(Check("4_growth", False, why, "no scaler"))
        else:
            why = "n/a: the loop never calls scaler.scale() or scaler.step()"
            report.checks.append(Check("3_overflow_skip_backoff", None, why, "n/a"))
            report.checks.append(Check("4_growth", None, why, "n/a"))
        if compare or not report.ok:
            ok, detail = _compare_runs(res, ref_run("main"), exact)
            report.reference = (ok, detail)
            learn = [c for c in report.checks if c.name in ("2_loss_vs_fp32", "2b_learned") and c.passed is False]
            if ok and exact and learn and not res.error:
                # bit-for-bit the reference: the reference itself does not learn this problem
                report.cannot = ("the loop trains bit-for-bit like the reference, and the reference itself "
                                 "fails " + ", ".join(c.name for c in learn) + " on this problem: "
                                 "the harness's problem is at fault, not the loop")
                for c in learn:
                    c.passed = None
                    c.figure += " (reference too)"
            if not ok and not res.error:
                for c in report.checks:
                    if c.name in ("2_loss_vs_fp32", "2b_learned") and c.passed is False:
                        c.detail += f"; vs the reference ({cfg.describe()}): {detail}"
    return report


# --------------------------------------------------------------------------- reference comparison


def _compare_runs(a: RunResult, b: RunResult, exact: bool) -> tuple[bool, str]:
    """Do two runs train the same? Else: the first optimizer step where they diverge."""
    if a.error or b.error:
        return False, f"raised: {a.error or b.error}"
    use_scaler = bool(a.snaps) and bool(b.snaps)
    sa, sb = (a.snaps, b.snaps) if use_scaler else (a.opt_snaps, b.opt_snaps)
    ba, bb = (a.update_batches, b.update_batches) if use_scaler else (a.opt_batches, b.opt_batches)
    la = {i: v for i, v in a.loss_calls}
    lb = {i: v for i, v in b.loss_calls}

    def loss_at(losses: dict[int, float], i: int) -> str:
        return f"{losses[i]:.6g}" if i in losses else "?"

    def close(u: torch.Tensor, v: torch.Tensor) -> bool:
        return bool(torch.equal(u, v)) if exact else bool(torch.allclose(u, v, rtol=1e-3, atol=1e-5))

    n = min(len(sa), len(sb))
    for i in range(n):
        scale_a = a.scales[i] if use_scaler and i < len(a.scales) else None
        scale_b = b.scales[i] if use_scaler and i < len(b.scales) else None
        if scale_a != scale_b or not close(sa[i], sb[i]) or (i < len(ba) and i < len(bb) and ba[i] != bb[i]):
            batch = ba[i] if i < len(ba) else -1
            diff = float((sa[i] - sb[i]).abs().max()) if sa[i].shape == sb[i].shape else math.nan
            parts = [f"first divergence at optimizer step {i} (batch {batch}"
                     + (f", reference batch {bb[i]}" if i < len(bb) and bb[i] != batch else "") + ")"]
            rbatch = bb[i] if i < len(bb) else batch
            if batch in la and rbatch in lb:  # the loop's own loss function is not observed
                parts.append(f"loss {loss_at(la, batch)} vs reference {loss_at(lb, rbatch)}")
            if use_scaler:
                parts.append(f"scale after the step {scale_a:g} vs {scale_b:g}")
                skip_a = a.skipped[i] if i < len(a.skipped) else None
                skip_b = b.skipped[i] if i < len(b.skipped) else None
                if skip_a != skip_b:
                    parts.append(f"step skipped: {skip_a} vs {skip_b}")
            parts.append(f"max |param - reference| {diff:.3g}")
            return False, ", ".join(parts)
    if len(sa) != len(sb):
        return False, (f"the loop made {len(sa)} optimizer steps, the reference {len(sb)} "
                       f"(same up to step {n - 1})" if n else
                       f"the loop made {len(sa)} optimizer steps, the reference {len(sb)}")
    if la and lb and la.keys() == lb.keys():
        for i in sorted(la):
            if (la[i] != lb[i]) if exact else abs(la[i] - lb[i]) > 1e-3 * max(abs(lb[i]), 1e-12):
                return False, f"first differing loss at batch {i}: {la[i]!r} vs reference {lb[i]!r}"
    if not sa and not sb:
        return False, "no optimizer step observed in either run"
    if exact:
        if not _same(a.params, b.params):
            return False, "same trajectory but the final parameters differ"
        return True, f"bit-identical: {len(sa)} optimizer steps, losses, scales and parameters"
    return True, f"{len(sa)} optimizer steps within rtol 1e-3"


def compare_to_reference(
    fn: Any,
    *,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    seed: int = 0,
    steps: int = STEPS,
    exact: bool | None = None,
) -> tuple[bool, str]:
    """Does ``fn`` train exactly like the reference loop configured like it (accumulation,
    clipping, optimizers, autocast dtype, scaler)? Bit for bit on CPU, within 1e-3 on CUDA.
    The detail says how the reference was configured, or where the two first diverge."""
    inv = _as_invoker(fn)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    exact = dev == "cpu" if exact is None else exact
    with cpu_threads(dev):
        got = run_loop(inv, seed=seed, device=dev, dtype=dt, steps=steps)
        cfg = observed_config(got, getattr(inv, "n_optimizers", 1), dev, dt)
        ref = run_loop(reference_invoker(cfg), seed=seed, device=dev, dtype=dt, steps=steps,
                       scaler_kwargs=None if cfg.scaler else {"enabled": False})
        ok, detail = _compare_runs(got, ref, exact)
    return ok, f"{detail} (reference: {cfg.describe()})"
