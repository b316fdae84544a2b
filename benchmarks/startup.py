#!/usr/bin/env python3
"""One-file start-up of `amplint check` (stdlib only; Python >= 3.10).

    python benchmarks/startup.py [--runs 21] [--amplint CMD] [--ruff CMD] [--file FILE] [--json OUT]

Runs each command ``--runs`` times, interleaved round by round (so background load falls
evenly on every row), and prints the median CPU time (user + system of the child, from
``os.wait4``) and the median wall time:

  python -c pass              the interpreter's own start-up (the floor)
  amplint --version
  amplint check FILE          warm cache (primed by one untimed run; nothing changed)
  amplint check FILE (cold)   the cache directory is emptied before every run
  amplint check --no-cache FILE
  amplint check --no-cache src/FILE (in a project)  the file in a small project: a
                              pyproject.toml without [tool.amplint], a second module and a
                              .gitignore of the common kinds of lines (comments, globs such as
                              *.py[cod], anchored paths): what a pre-commit call inside a
                              repository pays (project mode walks the project)
  ruff check FILE             only if ruff is installed (--isolated --no-cache)

FILE defaults to the AMP004 fixture (a small training loop with one finding, exit 1).
Every command runs in a scratch directory holding a copy of FILE, with
PYTHONDONTWRITEBYTECODE removed from its environment and after one untimed run, so
bytecode is compiled as in a regular install (an editable install with that variable
set would recompile every module on every run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_FILE = os.path.join(ROOT, "fixtures", "amp004_optimizer_step_bypasses_scaler", "before.py")

# the kinds of lines a Python project's .gitignore holds (written for this benchmark)
PROJECT_GITIGNORE = """# caches and builds
__pycache__/
*.py[cod]
*$py.class
*.so
build/
dist/
*.egg-info/
share/python-wheels/
docs/_build/
/site
.coverage.*
.pytest_cache/
# environments
.env
.venv
venv/
# experiments
wandb/
outputs/
checkpoints/
*.pt
*.ckpt
.idea/*
**/.ipynb_checkpoints/
"""


def _tool(name: str, explicit: str | None) -> list[str] | None:
    if explicit:
        cmd = shlex.split(explicit)
        return [os.path.abspath(cmd[0]) if os.sep in cmd[0] else cmd[0], *cmd[1:]]
    exe = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    return [exe] if exe else None


def _run(cmd: list[str], cwd: str, env: dict) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, exit code) of one run."""
    with tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=errf)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read().decode(errors="replace")
    if rc not in (0, 1) or "Traceback" in err:
        raise SystemExit(f"{shlex.join(cmd)} failed (exit {rc}):\n{err}")
    return ru.ru_utime + ru.ru_stime, wall, rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--amplint", help="the amplint command (default: the one next to this Python, else on PATH)")
    ap.add_argument("--ruff", help="the ruff command (default: next to this Python, else on PATH; skipped if absent)")
    ap.add_argument("--file", default=DEFAULT_FILE)
    ap.add_argument("--json", help="also write the medians to this file")
    args = ap.parse_args()

    amplint = _tool("amplint", args.amplint) or [sys.executable, "-m", "amplint"]
    ruff = _tool("ruff", args.ruff)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "AMPLINT_CACHE_DIR", "AMPLINT_OUTPUT_FORMAT")}
    # the python whose start-up is the floor: amplint's own interpreter when it is a script
    py = sys.executable
    if amplint and os.path.isfile(amplint[0]):
        with open(amplint[0], "rb") as fh:
            first = fh.readline().decode(errors="replace")
        if first.startswith("#!") and "python" in first:
            py = first[2:].strip().split()[0]

    work = tempfile.mkdtemp(prefix="amplint-startup-")
    elsewhere = tempfile.mkdtemp(prefix="amplint-startup-cache-")  # not inside the checked tree
    proj = tempfile.mkdtemp(prefix="amplint-startup-proj-")  # beside `work`: its .gitignore is not walked there
    try:
        shutil.copy(args.file, os.path.join(work, "one_file.py"))
        os.makedirs(os.path.join(proj, "src"))
        shutil.copy(args.file, os.path.join(proj, "src", "one_file.py"))
        with open(os.path.join(proj, "src", "util.py"), "w") as fh:
            fh.write("def helper(x):\n    return x + 1\n")
        with open(os.path.join(proj, "pyproject.toml"), "w") as fh:
            fh.write('[project]\nname = "proj"\nversion = "0.1"\n\n[tool.ruff]\nline-length = 100\n')
        with open(os.path.join(proj, ".gitignore"), "w") as fh:
            fh.write(PROJECT_GITIGNORE)
        cold_cache = os.path.join(elsewhere, "cold-cache")
        rows: list[tuple[str, list[str], object]] = [
            ("python -c pass", [py, "-c", "pass"], None),
            ("amplint --version", [*amplint, "--version"], None),
            ("amplint check one_file.py (warm cache)", [*amplint, "check", "one_file.py"], None),
            ("amplint check one_file.py (cold cache)", [*amplint, "check", "--cache-dir", cold_cache, "one_file.py"],
             lambda: shutil.rmtree(cold_cache, ignore_errors=True)),
            ("amplint check --no-cache one_file.py", [*amplint, "check", "--no-cache", "one_file.py"], None),
            ("amplint check --no-cache src/one_file.py (in a project)",
             [*amplint, "check", "--no-cache", os.path.join("src", "one_file.py")], None),
        ]
        if ruff:
            rows.append(("ruff check one_file.py", [*ruff, "check", "--isolated", "--no-cache", "one_file.py"], None))
        where = {name: proj if "(in a project)" in name else work for name, _, _ in rows}  # run from its root
        for name, cmd, before in rows:  # untimed: compile bytecode, prime the warm cache
            if before:
                before()
            _run(cmd, where[name], env)
        cpu: dict[str, list[float]] = {name: [] for name, _, _ in rows}
        wall: dict[str, list[float]] = {name: [] for name, _, _ in rows}
        codes: dict[str, int] = {}
        for i in range(args.runs):
            order = rows[i % len(rows):] + rows[: i % len(rows)]
            for name, cmd, before in order:
                if before:
                    before()
                c, w, rc = _run(cmd, where[name], env)
                cpu[name].append(c)
                wall[name].append(w)
                codes[name] = rc
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(elsewhere, ignore_errors=True)
        shutil.rmtree(proj, ignore_errors=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {load:.2f}, {args.runs} runs each, file {os.path.relpath(args.file, ROOT)}")
    print()
    print("| command | median CPU (ms) | median wall (ms) | exit |")
    print("| --- | ---: | ---: | ---: |")
    out = {}
    for name, _, _ in rows:
        mc, mw = statistics.median(cpu[name]) * 1000, statistics.median(wall[name]) * 1000
        out[name] = {"cpu_ms": round(mc, 1), "wall_ms": round(mw, 1), "exit": codes[name]}
        print(f"| `{name}` | {mc:.0f} | {mw:.0f} | {codes[name]} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"runs": args.runs, "load": load, "rows": out}, fh, indent=2)


if __name__ == "__main__":
    main()
