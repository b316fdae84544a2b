"""``amplint verify``: run the harness on the reference loop and on the training functions of
some scripts, without running the scripts.

For each file, :mod:`amplint.runtime.discover` loads only its definitions (imports, ``def``,
``class``, constant assignments; never a top-level call, loop, argparse or ``__main__`` block),
picks the training functions and methods with the static model and maps their parameters to
the harness objects by role (:mod:`amplint.runtime.roles`). Each function then runs the five
harness checks, is compared with the reference loop configured like it (accumulation
interval, clipping, optimizers, autocast dtype), and runs a few steps under the sanitizer.

The tiny seeded problem is fitted to each function's loss and reshaping first
(:mod:`amplint.runtime.fit`: class indices for ``cross_entropy``, 0/1 floats for
``bce_with_logits``, 1-D targets for ``model(x).squeeze(-1)``), and printed as its ``data:`` line.

One row per function, with a verdict: ``pass``, ``FAIL`` or ``cannot verify`` (the harness could
not make the loop's contract hold: torch reported a shape/dtype/target mismatch on the harness's
data, the loop mixes losses with different target contracts, or the loop trains bit-for-bit like
the reference and the reference itself does not learn the problem). The exit code is 1 when a
check fails, the sanitizer reports a misuse, or a file cannot be loaded; else 2 when a function
could not be verified (including one whose parameters cannot be mapped, and a loop at the top
level of a script, which verify does not run); else 0. The loop's
own prints go to stderr, so stdout (or ``-o FILE``) carries only amplint's output.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

from amplint.runtime.discover import UsageError
from amplint.runtime.harness import CHECK_NAMES, DeviceUnavailable

__all__ = ["Row", "verify", "format_table", "DeviceUnavailable", "PlotUnavailable", "UsageError",
           "PLOT_FORMATS", "check_plot_path"]

PLOT_HINT = "pip install matplotlib"
# matplotlib's Agg/PDF/SVG/PS back ends
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "pgf",
                "raw", "rgba")


class PlotUnavailable(RuntimeError):
    """``--plot`` cannot be honoured (no matplotlib, a missing directory, an unknown format)."""


@dataclass
class Row:
    loop: str
    device: str
    dtype: str
    checks: dict[str, tuple[bool | None, str, str]] = field(default_factory=dict)  # name -> (passed, figure, detail)
    reference: tuple[bool, str] | None = None
    violations: list[Any] = field(default_factory=list)  # sanitizer Violation objects
    error: str | None = None
    report: Any = None
    mapping: list[str] = field(default_factory=list)  # how the function was called (printable lines)
    slots: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    kind: str = "loop"  # loop | note (a function verified through another one, or a caller)
    cannot: str | None = None  # cannot verify: why the harness could not make the loop's contract hold

    @property
    def verdict(self) -> str:
        """``pass``, ``FAIL`` or ``cannot verify`` (a note row: ``note``)."""
        if self.kind == "note":
            return "note"
        if not self.ok:
            return "FAIL"
        return "cannot verify" if self.cannot else "pass"

    @property
    def ok(self) -> bool:
        if self.kind == "note" or self.cannot:
            return True
        return (self.error is None and all(p is not False for p, _, _ in self.checks.values())
                and not self.violations)

    def as_dict(self) -> dict[str, Any]:
        return {
            "loop": self.loop, "kind": self.kind, "device": self.device, "dtype": self.dtype, "ok": self.ok,
            "checks": {k: {"passed": p, "figure": f, "detail": d} for k, (p, f, d) in self.checks.items()},
            "matches_reference": None if self.reference is None else self.reference[0],
            "reference_detail": None if self.reference is None else self.reference[1],
            "violations": [v.as_dict() for v in self.violations], "error": self.error,
            "mapping": self.slots, "config": self.config, "notes": self.notes,
            "verdict": self.verdict, "cannot_verify": self.cannot,
        }


def _run_one(name: str, inv: Any, device: str, dtype: Any, is_reference: bool) -> Row:
    from amplint.runtime import harness

    problem = getattr(inv, "problem", None)
    if problem is not None and problem.unknown:
        row = Row(name, device, harness.dtype_name(harness.resolve_dtype(dtype)),
                  cannot=f"cannot verify: {problem.unknown}")
        if hasattr(inv, "describe"):
            row.mapping = inv.describe()
        return row
    cls = getattr(inv, "model_class", None)
    if problem is not None and cls is not None:
        fitted, why = harness.probe_model(cls, problem)
        if fitted is not None:
            problem = inv.problem = fitted
        else:
            inv.model_note = why
    if problem is not None and problem.optimizer is not None:
        problem = inv.problem = _checked_optimizer(problem, device, dtype)
    with harness.use_problem(problem):
        return _run_fitted(name, inv, device, dtype, is_reference)


def _checked_optimizer(problem: Any, device: str, dtype: Any) -> Any:
    """The problem with the script's optimizer when the reference loop passes every check with
    it on the harness's problem; else with the harness's SGD and the reason (a learning rate
    too small for the 50 tiny steps must not make a correct loop look wrong)."""
    import dataclasses

    from amplint.runtime import harness

    spec = problem.optimizer
    try:
        with harness.use_problem(problem):
            rep = harness.check_all(None, device=device, dtype=dtype, name="reference")
        bad = [c.name for c in rep.checks if c.passed is False or "(reference too)" in str(c.figure)] or \
            ([rep.cannot] if rep.cannot else [])
    except Exception as exc:  # the settings cannot be built or run here
        bad = [f"{type(exc).__name__}: {exc}"]
    if not bad:
        return problem
    return dataclasses.replace(problem, optimizer=None, optimizer_note=(
        f"the script's {spec.describe()} (line {spec.line}) is not used: the reference loop with it fails "
        f"{', '.join(bad)} on the harness's tiny problem"))


def _run_fitted(name: str, inv: Any, device: str, dtype: Any, is_reference: bool) -> Row:
    from amplint.runtime import harness
    from amplint.runtime.sanitizer import Sanitizer

    report = harness.check_all(inv, device=device, dtype=dtype, name=name, compare=not is_reference)
    row = Row(name, report.device, report.dtype, report=report)
    if report.cannot:
        row.cannot = f"cannot verify: {report.cannot}"
        if hasattr(inv, "describe"):
            row.mapping = inv.describe()
            row.slots = [s.as_dict() for s in inv.slots]
        return row
    cfg = report.config
    if cfg is not None and (cfg.dtype is not None or report.checks[0].passed):  # what the loop ran with
        row.dtype = harness.dtype_name(cfg.dtype) if cfg.dtype else "no autocast"
    for c in report.checks:
        row.checks[c.name] = (c.passed, c.figure, c.detail)
    if not is_reference:
        row.reference = report.reference
    row.config = cfg.as_dict() if cfg else None
    row.notes = list(report.notes)
    san = Sanitizer(report=False)
    accum = cfg.accum if cfg else 1
    with harness.cpu_threads(report.device), san:
        harness.run_loop(inv, device=report.device, dtype=harness.resolve_dtype(dtype), steps=3 * accum)
    row.violations = list(san.violations)
    if hasattr(inv, "describe"):
        row.mapping = inv.describe()
        row.slots = [s.as_dict() for s in inv.slots]
        if cfg is not None:
            row.mapping.append(f"  reference: {cfg.describe()} (as observed in the loop)")
        for n in report.notes:
            row.mapping.append(f"  note: {n}")
    unmodelled = _unmodelled_step_guard(inv, accum)
    if unmodelled and not row.ok and row.error is None and row.checks.get("1_finishes", (None,))[0] is not False:
        # `if i >= warmup: scaler.step(...)`: the loop skips steps the reference takes, so the
        # comparison and the step counts say nothing about its AMP protocol; a raise still FAILs
        line, g = unmodelled
        row.cannot = (f"cannot verify: scaler.step (line {line}) runs only when {g}, a condition the reference "
                      f"loop (one step per batch{', per accumulation window' if accum > 1 else ''}) does not model; "
                      f"the loop ran without an error")
    return row


def _unmodelled_step_guard(inv: Any, accum: int) -> tuple[int, str] | None:
    """The first guard around the loop's ``scaler.step`` that is not the accumulation guard the
    harness observed (``(i + 1) % accum == 0`` with accumulation seen), else None."""
    for line, g, kind in getattr(inv, "guards", ()):
        if kind != "step":
            continue
        if accum > 1 and "%" in g:
            continue
        return line, g
    return None


def check_plot_path(plot: str | os.PathLike[str]) -> None:
    """Raise :class:`PlotUnavailable` unless ``plot`` can be written as an image."""
    out = os.fspath(plot)
    ext = os.path.splitext(out)[1].lower().lstrip(".")
    if not ext:
        raise PlotUnavailable(f"--plot {out}: give a file name with an image extension "
                              f"(.png, .pdf, .svg, ...)")
    if ext not in PLOT_FORMATS:
        raise PlotUnavailable(f"--plot {out}: unknown image format '.{ext}' (use one of "
                              f"{', '.join('.' + e for e in PLOT_FORMATS[:4])}, ...)")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise PlotUnavailable(f"--plot {out}: directory {os.path.dirname(out) or '.'} does not exist")
    if os.path.isdir(out):
        raise PlotUnavailable(f"--plot {out}: is a directory")
    if not os.access(parent, os.W_OK):
        raise PlotUnavailable(f"--plot {out}: directory {os.path.dirname(out) or '.'} is not writable")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(f"--plot needs matplotlib, which is not installed: {PLOT_HINT}") from None


def verify(
    paths: Sequence[str | os.PathLike[str]] = (),
    device: str = "auto",
    dtype: str = "float16",
    plot: str | os.PathLike[str] | None = None,
    *,
    function: str | None = None,
    args: dict[str, str] | None = None,
) -> tuple[list[Row], int]:
    """Check the reference loop and the training functions of ``paths``; returns (rows, exit code).

    Raises :class:`DeviceUnavailable` for ``device="cuda"`` without CUDA, :class:`PlotUnavailable`
    for a ``plot`` path that cannot be written, and :class:`UsageError` for a ``function`` that
    is not there or an ``args`` name nothing uses (all before running any loop).
    """
    import torch

    from amplint.runtime import discover as disc
    from amplint.runtime import harness, reference

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable(
            "--device cuda: CUDA is not available (torch.cuda.is_available() is False"
            f"{'; this is a CPU-only torch build' if torch.version.cuda is None else ''}); "
            "use --device cpu or auto")
    dev = harness.resolve_device(device)
    dt = harness.resolve_dtype(dtype)
    if plot is not None:
        check_plot_path(plot)
    overrides = dict(args or {})
    saved_path, saved_argv = sys.path[:], sys.argv[:]
    try:
        found = []
        for path in paths:
            sys.argv = [os.fspath(path)]
            found.append(disc.discover(path, function=function, overrides=overrides,
                                       dtype_name=harness.dtype_name(dt)))
        if overrides:
            unused = disc.unused_overrides(found, overrides)
            if unused:
                raise UsageError("--arg " + ", ".join(unused) + ": no parameter, self attribute or "
                                 "module-level name of the verified function(s) has that name")
        rows = [_run_one("reference", reference.train_loop, dev, dt, True)]
        for d in found:
            sys.argv = [d.path]
            if d.error:
                # a top-level loop is not run (yet): not verified, not a failure of the loop
                top = d.error.startswith("no training function: the training loop runs at the top level")
                rows.append(Row(d.display, dev, harness.dtype_name(dt), error=d.error,
                                cannot=d.error if top else None))
                continue
            for t in d.targets:
                if t.status == "run":
                    rows.append(_run_one(t.plan.display, t.plan, dev, dt, False))
                elif t.status == "unmapped":  # the harness cannot call it: cannot verify (exit 2)
                    what = "the top-level loop" if t.func.name == "_amplint_toplevel" else t.func.qualname
                    why = f"cannot verify {what}: {t.reason}"
                    rows.append(Row(t.plan.display, dev, harness.dtype_name(dt), error=why, cannot=why))
                else:
                    rows.append(Row(t.plan.display, dev, harness.dtype_name(dt), kind="note",
                                    notes=[f"not run: {t.reason}" if t.status == "caller" else t.reason]))
    finally:
        sys.path[:] = saved_path
        sys.argv = saved_argv
    if plot is not None:
        draw_plot(rows, os.fspath(plot))
    return rows, exit_code(rows)


def exit_code(rows: Sequence[Row]) -> int:
    """1 when a check fails, the sanitizer reports a misuse or a file cannot be loaded; else 2
    when a loop could not be verified (``cannot verify``, an unmapped function, a top-level
    loop); else 0."""
    if not all(r.ok for r in rows):
        return 1
    return 2 if any(r.cannot for r in rows) else 0


def _cell(passed: bool | None, figure: str) -> str:
    mark = {True: "pass", False: "FAIL", None: "n/a"}[passed]
    return f"{mark} {figure}".strip() if passed is not None else "n/a"


def format_table(rows: Sequence[Row]) -> str:
    """How each function was called, then a table: loop, device, dtype, each check with its
    figure, reference, sanitizer; then the details of what failed."""
    lines: list[str] = []
    for r in rows:
        if r.mapping:
            lines.extend(r.mapping)
    if lines:
        lines.append("")
    header = ["loop", "device", "dtype", *CHECK_NAMES, "reference", "sanitizer"]
    body = []
    table_rows = [r for r in rows if r.kind != "note"]
    for r in table_rows:
        if r.cannot:
            body.append([r.loop, r.device, r.dtype, "cannot verify (see below)"] + [""] * (len(header) - 4))
            continue
        if r.error:
            body.append([r.loop, r.device, r.dtype, "ERROR (see below)"] + [""] * (len(header) - 4))
            continue
        cells = [r.loop, r.device, r.dtype]
        for name in CHECK_NAMES:
            p, fig, _ = r.checks.get(name, (None, "", ""))
            cells.append(_cell(p, fig))
        if r.reference is None:
            cells.append("-")
        else:
            cells.append("same" if r.reference[0] else "differs")
        codes = sorted({v.code for v in r.violations})
        cells.append("clean" if not r.violations else ",".join(codes))
        body.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header))]
    table = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *body]]
    table.insert(1, "  ".join("-" * w for w in widths))
    lines.extend(table)
    failures = [r for r in table_rows if not r.ok]
    if failures:
        lines.append("")
        for r in failures:
            if r.error:
                lines.append(f"{r.loop}: {r.error}")
                continue
            for name, (p, _, detail) in r.checks.items():
                if p is False:
                    lines.append(f"{r.loop}: {name}: {detail}")
            for v in r.violations:
                lines.append(f"{r.loop}: sanitizer: {v}")
    differs = [r for r in table_rows if r.reference is not None and not r.reference[0] and not r.error]
    if differs:
        lines.append("")
        for r in differs:
            lines.append(f"{r.loop}: differs from the reference loop: {r.reference[1]}")
    cannot = [r for r in table_rows if r.cannot]
    if cannot:
        lines.append("")
        for r in cannot:
            lines.append(f"{r.loop}: {r.cannot}")
    notes = [r for r in rows if r.kind == "note"]
    if notes:
        lines.append("")
        for r in notes:
            for n in r.notes:
                lines.append(f"{r.loop}: {n}")
    return "\n".join(lines)


def draw_plot(rows: Sequence[Row], out: str) -> None:
    """Loss curves (each loop and fp32) and the loss-scale trajectories, saved to ``out``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(f"--plot needs matplotlib: {PLOT_HINT}") from None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    fp32_done = False
    for r in rows:
        rep = r.report
        if rep is None:
            continue
        if not fp32_done and rep.fp32_losses:
            ax1.plot(rep.fp32_losses, "k--", label="fp32")
            fp32_done = True
        losses = [v for v in rep.losses if v is not None]
        if losses:
            ax1.plot(losses, label=f"{r.loop} ({r.dtype})")
        if rep.scales:
            ax2.step(range(len(rep.scales)), rep.scales, where="post", label=r.loop)
    ax1.set_xlabel("batch")
    ax1.set_ylabel("training loss")
    ax1.set_yscale("log")
    ax1.legend(fontsize="small")
    ax2.set_xlabel("optimizer step")
    ax2.set_ylabel("loss scale")
    ax2.set_yscale("log", base=2)
    ax2.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(out)
    except (OSError, ValueError) as exc:
        raise PlotUnavailable(f"--plot {out}: cannot write the image: {exc}") from None
    finally:
        plt.close(fig)
