#!/usr/bin/env python3
"""amplint performance benchmarks (stdlib only; Python >= 3.10).

    python benchmarks/bench.py synth --files 2000 --out benchmarks/out/corpus --seed 0 --verify
    python benchmarks/bench.py run benchmarks/out/corpus [DIR ...] [--runs 5] [--json out.json]
    python benchmarks/bench.py profile benchmarks/out/corpus

``run`` times, per directory and alternating the tools within every round (the
order also rotates from round to round, so drift and ordering effects cancel):

  amplint-cold    amplint check --no-cache --output-format concise DIR
  amplint-warm    amplint check --cache-dir TMP --output-format concise DIR   (after one priming run)
  ruff            ruff check --isolated --no-cache --output-format concise DIR
  fixit           fixit lint DIR                       (only if fixit is installed; per-run timeout)
  amplint-1file   amplint check --no-cache FILE        (one small AMP file: pre-commit's common case)
  ruff-1file      ruff check --isolated --no-cache FILE (same file, for the ratio)

Exit codes 0 and 1 (no findings / findings) count as success; anything else (or
a Python traceback on stderr) is an error, shown in the table as ``error: <first stderr line>`` and the tool is
not run again for that directory. Wall time is measured around spawn+wait; the
peak RSS comes from ``os.wait4`` on the child (the largest resident set of the
child or of any descendant it waited for -- not a sum over worker processes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402  (benchmarks/synth.py)

EXCLUDED_DIRS = {
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "__pycache__", "node_modules",
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".amplint_cache",
    "build", "dist", ".eggs", "site-packages", "__pypackages__",
}

SINGLE_FILE_FALLBACK = '''\
"""Minimal AMP training step (bench.py single-file start-up probe)."""
import torch


def train_step(model, batch, optimizer, criterion):
    scaler = torch.amp.GradScaler("cuda")
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = criterion(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
'''


# --------------------------------------------------------------------------- helpers


def iter_py_files(root: Path):
    """Yield .py files under root, skipping virtualenvs, VCS and cache directories."""
    if root.is_file():
        if root.suffix == ".py":
            yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in EXCLUDED_DIRS and not d.endswith(".egg-info")
            and not (Path(dirpath, d) / "pyvenv.cfg").exists()
        )
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath, name)


def scan_dir(root: Path) -> tuple[int, int, list[Path]]:
    """Count files and lines; reading every file also warms the OS page cache."""
    files = list(iter_py_files(root))
    lines = 0
    for f in files:
        try:
            with open(f, "rb") as fh:
                lines += fh.read().count(b"\n")
        except OSError:
            pass
    return len(files), lines, files


def find_tool(option: str | None, exe: str, module: str | None) -> list[str] | None:
    """--tool CMD, else `exe` on PATH, else next to this interpreter, else `python -m module`."""
    if option:
        return shlex.split(option)
    found = shutil.which(exe)
    if found:
        return [found]
    sibling = Path(sys.executable).parent / exe
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [str(sibling)]
    if module:
        return [sys.executable, "-m", module]
    return None


def first_error_line(stderr: str, stdout: str = "") -> str:
    """First stderr line, or the exception line when stderr is a traceback."""
    lines = [ln.strip() for ln in (stderr or stdout).splitlines() if ln.strip()]
    if not lines:
        return "(no output)"
    line = lines[0]
    if line.startswith("Traceback") and len(lines) > 1:
        line = lines[-1]
    return line if len(line) <= 160 else line[:157] + "..."


@dataclass
class ChildResult:
    seconds: float
    returncode: int | None
    maxrss: int  # bytes
    stdout: str
    stderr: str
    timed_out: bool = False
    spawn_error: str | None = None


def run_child(argv: list[str], timeout: float | None = None) -> ChildResult:
    """Run argv, wait with os.wait4 to get the child's own rusage (peak RSS)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
            )
        except OSError as exc:
            return ChildResult(0.0, None, 0, "", "", spawn_error=f"{argv[0]}: {exc.strerror or exc}")
        fired = threading.Event()
        timer = None
        if timeout:
            def kill() -> None:
                fired.set()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            timer = threading.Timer(timeout, kill)
            timer.daemon = True
            timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        if timer:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # tell Popen it is reaped
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        out.seek(0)
        err.seek(0)
        return ChildResult(
            seconds=elapsed,
            returncode=proc.returncode,
            maxrss=usage.ru_maxrss * scale,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            timed_out=fired.is_set(),
        )


def tool_version(cmd: list[str] | None) -> str:
    if not cmd:
        return "not installed"
    r = run_child(cmd + ["--version"], timeout=60)
    if r.spawn_error:
        return f"unavailable ({r.spawn_error})"
    if r.returncode != 0:
        return f"unknown ({first_error_line(r.stderr, r.stdout)})"
    return (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr).strip() else "unknown"


# --------------------------------------------------------------------------- benchmarks


@dataclass
class Bench:
    key: str
    argv: list[str]
    display: str  # command as shown in the table/README (paths abbreviated)
    files: int
    ratio_to: str | None  # key of the ruff row this is compared with
    timeout: float | None = None
    times: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    returncodes: list[int] = field(default_factory=list)
    output_lines: list[int] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False
    skipped: str | None = None

    @property
    def active(self) -> bool:
        return not (self.error or self.timed_out or self.skipped)

    def record(self, r: ChildResult) -> None:
        if r.spawn_error:
            self.error = r.spawn_error
            return
        if r.timed_out:
            self.timed_out = True
            return
        # 0 = clean, 1 = findings; Python also exits 1 on an uncaught exception, so a
        # traceback on stderr marks the run as failed too.
        if r.returncode not in (0, 1) or "Traceback (most recent call last)" in r.stderr:
            self.error = f"exit {r.returncode}: {first_error_line(r.stderr, r.stdout)}"
            return
        self.times.append(r.seconds)
        self.rss.append(r.maxrss)
        self.returncodes.append(r.returncode)
        self.output_lines.append(r.stdout.count("\n"))

    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    def to_json(self) -> dict:
        med = self.median()
        return {
            "key": self.key,
            "argv": self.argv,
            "files": self.files,
            "times_s": [round(t, 6) for t in self.times],
            "median_s": med,
            "min_s": min(self.times) if self.times else None,
            "max_s": max(self.times) if self.times else None,
            "files_per_s": (self.files / med) if med else None,
            "peak_rss_bytes": max(self.rss) if self.rss else None,
            "rss_bytes": self.rss,
            "returncodes": self.returncodes,
            "output_lines": self.output_lines,
            "error": self.error,
            "timed_out": self.timed_out,
            "timeout_s": self.timeout,
            "skipped": self.skipped,
        }


def pick_single_file(root: Path, files: list[Path], tmp: Path) -> Path:
    """Smallest file under root that uses GradScaler (<= 300 lines), else a built-in one."""
    best: tuple[int, str] | None = None
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            continue
        if b"GradScaler" in data and b"autocast" in data:
            n = data.count(b"\n")
            if n <= 300 and (best is None or (n, str(f)) < best):
                best = (n, str(f))
    if best:
        return Path(best[1])
    p = tmp / "amp_step.py"
    p.write_text(SINGLE_FILE_FALLBACK, encoding="utf-8")
    return p


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.2f}" if x < 100 else f"{x:.1f}"


def fmt_rate(files: int, med: float | None) -> str:
    if not med:
        return "-"
    r = files / med
    return f"{r:,.0f}" if r >= 100 else f"{r:.1f}"


def table(benches: list[Bench]) -> str:
    by_key = {b.key: b for b in benches}
    head = ["benchmark", "command", "runs", "median (s)", "min (s)", "max (s)", "files", "files/s", "peak RSS (MiB)", "× ruff"]
    rows = [head, ["---"] * 3 + ["---:"] * 7]
    for b in benches:
        cmd = f"`{b.display}`"
        if b.skipped:
            rows.append([b.key, cmd, "0", f"skipped: {b.skipped}", "-", "-", str(b.files), "-", "-", "-"])
            continue
        if b.error and not b.times:
            rows.append([b.key, cmd, "0", f"error: {b.error}", "-", "-", str(b.files), "-", "-", "-"])
            continue
        if b.timed_out and not b.times:
            t = f">{b.timeout:g} s"
            rows.append([b.key, cmd, "0", t, "-", "-", str(b.files), f"<{fmt_rate(b.files, b.timeout)}", "-", "-"])
            continue
        med = b.median()
        ratio = "-"
        ref = by_key.get(b.ratio_to) if b.ratio_to else None
        if ref is not None and ref is not b and ref.median() and med:
            ratio = f"{med / ref.median():.2f}×"
        elif ref is b:
            ratio = "1.00×"
        note = ""
        if b.error:
            note = f" (then error: {b.error})"
        elif b.timed_out:
            note = f" (then >{b.timeout:g} s)"
        rows.append([
            b.key, cmd, str(len(b.times)), fmt_s(med) + note, fmt_s(min(b.times)), fmt_s(max(b.times)),
            str(b.files), fmt_rate(b.files, med), f"{max(b.rss) / 2**20:.0f}", ratio,
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = []
    for i, r in enumerate(rows):
        if i == 1:
            cells = [("-" * (w - 1) + ":") if c.endswith(":") else "-" * w for c, w in zip(r, widths)]
        else:
            cells = [c.ljust(w) if j < 2 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def bench_dir(root: Path, args, tools: dict[str, list[str] | None], tmp: Path) -> dict:
    n_files, n_lines, files = scan_dir(root)
    print(f"\n### `{root}` — {n_files} .py files, {n_lines:,} lines\n", flush=True)
    amplint, ruff, fixit = tools["amplint"], tools["ruff"], tools["fixit"]
    d = str(root)
    cache_dir = Path(tempfile.mkdtemp(prefix="amplint-cache-", dir=tmp))
    single = Path(args.single_file) if args.single_file else pick_single_file(root, files, tmp)
    benches: list[Bench] = [
        Bench("amplint-cold", amplint + ["check", "--no-cache", "--output-format", "concise", d],
              "amplint check --no-cache --output-format concise DIR", n_files, "ruff", args.timeout),
        Bench("amplint-warm", amplint + ["check", "--cache-dir", str(cache_dir), "--output-format", "concise", d],
              "amplint check --cache-dir TMP --output-format concise DIR", n_files, "ruff", args.timeout),
        Bench("ruff", ruff + ["check", "--isolated", "--no-cache", "--output-format", "concise", d],
              "ruff check --isolated --no-cache --output-format concise DIR", n_files, "ruff", args.timeout),
        Bench("fixit", (fixit or ["fixit"]) + ["lint", d], "fixit lint DIR", n_files, "ruff", args.fixit_timeout),
        Bench("amplint-1file", amplint + ["check", "--no-cache", str(single)],
              "amplint check --no-cache FILE", 1, "ruff-1file", args.timeout),
        Bench("ruff-1file", ruff + ["check", "--isolated", "--no-cache", str(single)],
              "ruff check --isolated --no-cache FILE", 1, "ruff-1file", args.timeout),
    ]
    if not fixit:
        benches[3].skipped = "fixit not installed"
    only = set(args.only.split(",")) if args.only else None
    for b in benches:
        if only is not None and b.key not in only and not b.skipped:
            b.skipped = "not selected (--only)"
    warm = benches[1]
    if warm.active:
        print("priming the amplint cache ...", file=sys.stderr, flush=True)
        r = run_child(warm.argv, warm.timeout)
        probe = Bench("prime", warm.argv, "", 0, None, warm.timeout)
        probe.record(r)
        if probe.error:
            warm.error = probe.error
        elif probe.timed_out:
            warm.timed_out = True
    for rnd in range(args.runs):
        active = [b for b in benches if b.active]
        if not active:
            break
        k = rnd % len(active)
        order = active[k:] + active[:k]
        for b in order:
            b.record(run_child(b.argv, b.timeout))
        status = ", ".join(f"{b.key}={fmt_s(b.times[-1]) if b.times and b.active else ('error' if b.error else 'timeout' if b.timed_out else '-')}" for b in order)
        print(f"round {rnd + 1}/{args.runs}: {status}", file=sys.stderr, flush=True)
    print(table(benches), flush=True)
    print(f"\nsingle-file probe: `{single}`", flush=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return {
        "dir": d, "py_files": n_files, "lines": n_lines, "single_file": str(single),
        "benchmarks": [b.to_json() for b in benches],
    }


def cmd_run(args) -> int:
    tools = {
        "amplint": find_tool(args.amplint, "amplint", "amplint"),
        "ruff": find_tool(args.ruff, "ruff", "ruff"),
        "fixit": None if args.no_fixit else find_tool(args.fixit, "fixit", None),
    }
    dirs = [Path(d) for d in args.dirs]
    for d in dirs:
        if not d.exists():
            print(f"error: {d} does not exist", file=sys.stderr)
            return 2
    versions = {k: tool_version(v) for k, v in tools.items()}
    meta = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "runs": args.runs,
        "tools": {k: v for k, v in tools.items()},
        "versions": versions,
    }
    print("## amplint benchmark\n")
    print(f"- {meta['date']}, {meta['platform']}, {meta['cpu_count']} CPUs, Python {meta['python']}, {args.runs} runs")
    for k in ("amplint", "ruff", "fixit"):
        cmd = " ".join(shlex.quote(a) for a in tools[k]) if tools[k] else "-"
        print(f"- {k}: {versions[k]} (`{cmd}`)")
    results = []
    with tempfile.TemporaryDirectory(prefix="amplint-bench-") as tmp:
        for d in dirs:
            results.append(bench_dir(d.resolve(), args, tools, Path(tmp)))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- synth / profile


def cmd_synth(args) -> int:
    out = Path(args.out)
    t0 = time.perf_counter()
    try:
        manifest = synth.synthesize(out, args.files, args.seed, force=args.force)
    except (FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.files} files to {out} (seed {args.seed}) in {time.perf_counter() - t0:.1f}s")
    print(synth.summary(manifest))
    if args.verify:
        problems = synth.verify(out, manifest)
        if problems:
            print(f"verify: {len(problems)} problem(s)", file=sys.stderr)
            for p in problems[:50]:
                print(f"  {p}", file=sys.stderr)
            return 1
        print(f"verify: all {len(manifest['entries'])} files compile under Python {sys.version.split()[0]}; sizes within {synth.MIN_LINES}-{synth.MAX_LINES} lines")
    return 0


def default_profile_python() -> str:
    import importlib.util

    if importlib.util.find_spec("amplint") is None:
        venv_py = HERE / ".venv" / "bin" / "python"
        if venv_py.exists():
            return str(venv_py)
    return sys.executable


def cmd_profile(args) -> int:
    py = args.python or default_profile_python()
    # -j 1: cProfile sees only its own process, so the analysis must run in it
    argv = [py, "-m", "cProfile", "-s", args.sort, "-m", "amplint", "check", "--no-cache", "-j", "1", args.dir]
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    r = run_child(argv, args.timeout)
    if r.spawn_error:
        print(f"error: {r.spawn_error}", file=sys.stderr)
        return 2
    if r.timed_out:
        print(f"error: timed out after {args.timeout:g} s", file=sys.stderr)
        return 2
    if "Traceback (most recent call last)" in r.stderr:
        print(f"error: amplint failed under cProfile: {first_error_line(r.stderr)}", file=sys.stderr)
        return 2
    lines = r.stdout.splitlines()
    header = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls") and "tottime" in ln), None)
    if header is None:
        print(f"error: no profile output (exit {r.returncode}): {first_error_line(r.stderr, r.stdout)}", file=sys.stderr)
        return 2
    start = header
    for i in range(header - 1, max(-1, header - 6), -1):  # "N function calls ... in X seconds", "Ordered by"
        if "function calls" in lines[i]:
            start = i
            break
    body = [ln for ln in lines[header + 1:] if ln.strip()][: args.top]
    print("\n".join(lines[start:header + 1] + body))
    print(f"\n(wall {r.seconds:.2f} s under cProfile, peak RSS {r.maxrss / 2**20:.0f} MiB)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("synth", help="build a reproducible synthetic corpus")
    s.add_argument("--files", type=int, default=2000, help="number of .py files (default 2000)")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--verify", action="store_true", help="compile every file and check sizes")
    s.add_argument("--force", action="store_true", help="overwrite a non-corpus output directory")
    s.set_defaults(func=cmd_synth)

    r = sub.add_parser("run", help="time amplint against ruff (and fixit)")
    r.add_argument("dirs", nargs="+", metavar="DIR")
    r.add_argument("--runs", type=int, default=5, help="timed rounds per directory (default 5)")
    r.add_argument("--json", help="write raw results here")
    r.add_argument("--amplint", help="amplint command (default: amplint on PATH, else python -m amplint)")
    r.add_argument("--ruff", help="ruff command (default: ruff on PATH, else python -m ruff)")
    r.add_argument("--fixit", help="fixit command (default: fixit on PATH; skipped if absent)")
    r.add_argument("--no-fixit", action="store_true", help="skip fixit even if installed")
    r.add_argument("--fixit-timeout", type=float, default=120.0, help="per-run fixit timeout in s (default 120)")
    r.add_argument("--timeout", type=float, default=600.0, help="per-run timeout for the other tools (default 600)")
    r.add_argument("--single-file", help="file for the single-file start-up rows (default: smallest AMP file in DIR)")
    r.add_argument("--only", help="comma-separated subset of: amplint-cold,amplint-warm,ruff,fixit,amplint-1file,ruff-1file")
    r.set_defaults(func=cmd_run)

    q = sub.add_parser("profile", help="cProfile one cold amplint run")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("--python", help="interpreter with amplint installed (default: this one, else benchmarks/.venv)")
    q.add_argument("--top", type=int, default=25)
    q.add_argument("--sort", default="cumulative")
    q.add_argument("--timeout", type=float, default=1800.0)
    q.set_defaults(func=cmd_profile)

    args = p.parse_args(argv)
    if getattr(args, "runs", 1) < 1:
        p.error("--runs must be >= 1")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
