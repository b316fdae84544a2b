"""``amplint verify``: run the harness on the reference loop and on every loop in some files.

Each loop (see :mod:`amplint.runtime.harness` for the two contracts) runs the five harness
checks, is compared with the reference loop, and runs 3 steps under the sanitizer. One row
per loop; the exit code is 1 when any check fails, a file cannot be imported or holds no loop,
or the sanitizer reports anything, else 0. The ``reference`` column (same/differs) is
informational only: a correct loop may legitimately differ (no scaler under bf16, another
clip threshold, gradient accumulation).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from amplint.runtime.harness import CHECK_NAMES, DeviceUnavailable

__all__ = ["Row", "verify", "format_table", "DeviceUnavailable", "PlotUnavailable"]


class PlotUnavailable(RuntimeError):
    """``plot=...`` was asked for but matplotlib is not installed."""


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

    @property
    def ok(self) -> bool:
        return (self.error is None and all(p is not False for p, _, _ in self.checks.values())
                and not self.violations)

    def as_dict(self) -> dict[str, Any]:
        return {
            "loop": self.loop, "device": self.device, "dtype": self.dtype, "ok": self.ok,
            "checks": {k: {"passed": p, "figure": f, "detail": d} for k, (p, f, d) in self.checks.items()},
            "matches_reference": None if self.reference is None else self.reference[0],
            "reference_detail": None if self.reference is None else self.reference[1],
            "violations": [v.as_dict() for v in self.violations], "error": self.error,
        }


def _run_one(name: str, fn: Any, device: str, dtype: Any, is_reference: bool) -> Row:
    from amplint.runtime import harness
    from amplint.runtime.sanitizer import Sanitizer

    report = harness.check_all(fn, device=device, dtype=dtype, name=name)
    row = Row(name, report.device, report.dtype, report=report)
    for c in report.checks:
        row.checks[c.name] = (c.passed, c.figure, c.detail)
    if not is_reference:
        row.reference = harness.compare_to_reference(fn, device=device, dtype=dtype)
    san = Sanitizer(report=False)
    with harness.cpu_threads(report.device), san:
        harness.run_loop(fn, device=report.device, dtype=harness.resolve_dtype(dtype), steps=3)
    row.violations = list(san.violations)
    return row


def verify(
    paths: Sequence[str | os.PathLike[str]] = (),
    device: str = "auto",
    dtype: str = "float16",
    plot: str | os.PathLike[str] | None = None,
) -> tuple[list[Row], int]:
    """Check the reference loop and every loop in ``paths``; returns (rows, exit code).

    Raises :class:`DeviceUnavailable` for ``device="cuda"`` without CUDA and
    :class:`PlotUnavailable` for ``plot=`` without matplotlib (both before running anything).
    """
    import torch

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
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PlotUnavailable("--plot needs matplotlib, which is not installed: "
                                  "pip install matplotlib") from None
    rows = [_run_one("reference", reference.train_loop, dev, dt, True)]
    for path in paths:
        try:
            loops = harness.load_loops(path)
        except Exception as exc:  # the file itself failed to import
            row = Row(harness._display_path(path), dev, harness.dtype_name(dt),
                      error=f"import failed: {type(exc).__name__}: {exc}")
            rows.append(row)
            continue
        if not loops:
            rows.append(Row(harness._display_path(path), dev, harness.dtype_name(dt),
                            error="no train_step/train_loop function found"))
            continue
        for name, fn in loops:
            rows.append(_run_one(name, fn, dev, dt, False))
    if plot is not None:
        draw_plot(rows, os.fspath(plot))
    return rows, 0 if all(r.ok for r in rows) else 1


def _cell(passed: bool | None, figure: str) -> str:
    mark = {True: "pass", False: "FAIL", None: "n/a"}[passed]
    return f"{mark} {figure}".strip() if passed is not None else "n/a"


def format_table(rows: Sequence[Row]) -> str:
    """A plain-text table: loop, device, dtype, each check with its figure, reference, sanitizer."""
    header = ["loop", "device", "dtype", *CHECK_NAMES, "reference", "sanitizer"]
    body = []
    for r in rows:
        if r.error:
            body.append([r.loop, r.device, r.dtype, f"ERROR {r.error}"] + [""] * (len(header) - 4))
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
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failures = [r for r in rows if not r.ok]
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
    if any(r.reference is not None and not r.reference[0] for r in rows):
        lines.append("")
        for r in rows:
            if r.reference is not None and not r.reference[0]:
                lines.append(f"{r.loop}: differs from the reference loop: {r.reference[1]}")
    return "\n".join(lines)


def draw_plot(rows: Sequence[Row], out: str) -> None:
    """Loss curves (each loop and fp32) and the loss-scale trajectories, saved to ``out``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install matplotlib") from None
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
    ax1.set_xlabel("step")
    ax1.set_ylabel("training loss")
    ax1.set_yscale("log")
    ax1.legend(fontsize="small")
    ax2.set_xlabel("step")
    ax2.set_ylabel("loss scale")
    ax2.set_yscale("log", base=2)
    ax2.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
