"""Run a program under the AMP sanitizer, in every Python process it starts, and report.

Usage::

    amplint trace [--json] [-o FILE] [--fail-if-unchecked] -- COMMAND [ARGS...]
    python -m amplint.runtime.trace [OPTIONS] -- COMMAND [ARGS...]

COMMAND is run as a child process, as a shell would run it: ``train.py ARGS`` (a script: run
with this interpreter), ``python [-u] [-X opt] [-W arg] train.py``, ``python -m pkg.mod``,
``/usr/bin/env python train.py``, or a launcher on ``PATH`` (``torchrun --nproc-per-node 2
train.py``, ``accelerate launch train.py``). A bare ``python``/``python3`` means the
interpreter amplint runs in; give a path to use another one.

Every Python process the command starts (the script, torchrun's and accelerate's workers,
``python -m torch.distributed.run``, multiprocessing children, forked or spawned) loads
amplint's start-up hook through ``PYTHONPATH`` (a ``sitecustomize`` that chains to any existing
one) and runs under :func:`amplint.runtime.sanitizer.sanitize` from the moment it imports torch.
Each writes its findings to a private directory when it ends; this process merges them (one
line per misuse and place, with the count and the ranks that hit it) and prints them to stdout
as ``path:line: AMPxxx message``, and always ends with a summary on stderr: the processes
traced, every GradScaler seen (device, enabled or not and why), iterations, scaler steps,
autocast regions, backward calls, findings. When no enabled GradScaler and no enabled autocast
region was seen, the summary says that nothing was checked and why (``the GradScaler is
disabled: CUDA is not available``).

Exit status: 1 when a misuse was found (or, with ``--fail-if-unchecked``, nothing was checked),
2 for a usage error, otherwise the program's own exit status.

``--json`` prints one JSON object (``violations``, ``processes``, ``checked``, ``unchecked_reason``,
``exit_status``) on stdout, and the program's own stdout goes to stderr so stdout parses;
``-o FILE`` writes the report (text or JSON) to FILE instead of stdout.

:func:`run_traced` runs a script in this process instead (no child processes followed).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import traceback
from typing import Any, Sequence

__all__ = ["main", "run_traced", "split_command", "resolve_command", "merge_reports", "summary_lines",
           "cannot_verify_reason",
           "CommandError", "EXIT_CODES"]

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")

USAGE = ("usage: amplint trace [--json] [-o FILE] [--fail-if-unchecked] -- COMMAND [ARGS...]\n"
         "  COMMAND: train.py | python [-u|-X opt|-W arg] train.py | python -m module | torchrun ... | "
         "accelerate launch ...")

EXIT_CODES = ("exit status: 1 AMP misuse found (or nothing checked with --fail-if-unchecked); "
              "2 usage error; otherwise the program's own exit status")

# python options that take a value (python -X importtime -W error script.py)
_PY_OPTS_WITH_ARG = {"-X", "-W", "-Q", "--check-hash-based-pycs"}
# options that make python ignore PYTHONPATH or site, so the hook cannot load
_PY_OPTS_NO_HOOK = {"-I": "-I (isolated mode) ignores PYTHONPATH", "-E": "-E ignores PYTHONPATH",
                    "-S": "-S disables the site module (no sitecustomize)"}


class CommandError(ValueError):
    """The command cannot be run (usage error, exit 2)."""


# ---------------------------------------------------------------------- the command


def split_command(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """``[python] script.py ARGS`` or ``[python] -m mod ARGS`` -> (kind, target, args).

    Python options before the script (``-u``, ``-X opt``, ``-W arg``, ``-O``, ``-B``) are skipped.
    """
    argv = list(argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv and os.path.basename(argv[0]) == "env":
        argv = argv[1:]
    if argv and (_PYTHON.match(os.path.basename(argv[0])) or argv[0] == sys.executable):
        argv = argv[1:]
    while argv and argv[0].startswith("-") and argv[0] not in ("-m", "-c", "-"):
        opt = argv.pop(0)
        if opt in _PY_OPTS_WITH_ARG and argv:
            argv.pop(0)
    if not argv:
        raise ValueError("no script given")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise ValueError("-m needs a module name")
        return "module", argv[1], argv[2:]
    if argv[0] in ("-c", "-"):
        raise ValueError(f"python {argv[0]} is not supported: give a script or -m module")
    return "path", argv[0], argv[1:]


def _is_python(exe: str) -> bool:
    return bool(_PYTHON.match(os.path.basename(exe))) or os.path.realpath(exe) == os.path.realpath(sys.executable)


def _check_python_args(args: Sequence[str]) -> None:
    """Reject interpreter options that stop the hook; check that a script exists."""
    i = 0
    args = list(args)
    while i < len(args):
        a = args[i]
        if a in ("-m", "-c", "-"):
            return
        if not a.startswith("-"):
            if not os.path.exists(a):
                raise CommandError(f"amplint trace: no such file: {a}")
            return
        letters = a[1:] if not a.startswith(("--", "-X", "-W")) else ""
        for flag, why in _PY_OPTS_NO_HOOK.items():
            if a == flag or (letters.isalpha() and flag[1] in letters and a not in _PY_OPTS_WITH_ARG):
                raise CommandError(f"amplint trace: python {why}, so the traced processes would not load "
                                   f"amplint's hook; drop {flag}")
        i += 2 if a in _PY_OPTS_WITH_ARG else 1
    raise CommandError("amplint trace: give python a script or -m module (an interactive python is not traced)")


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    here = os.path.join(os.path.dirname(sys.executable), name)  # the venv's bin/, not activated
    return here if os.path.isfile(here) and os.access(here, os.X_OK) else None


def resolve_command(command: Sequence[str]) -> list[str]:
    """The argv to run (see the module docstring); raises :class:`CommandError`."""
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CommandError("no command given")
    first = cmd[0]
    if os.path.basename(first) == "env" and len(cmd) > 1:  # /usr/bin/env python train.py
        rest = resolve_command(cmd[1:])
        return [first, *cmd[1:2], *rest[1:]] if _PYTHON.match(os.path.basename(cmd[1])) else [first, *rest]
    if _PYTHON.match(first):  # a bare python/python3: this interpreter (it has amplint)
        version = first[len("python"):]
        if version in ("", "3") or version == f"{sys.version_info[0]}.{sys.version_info[1]}":
            _check_python_args(cmd[1:])
            return [sys.executable, *cmd[1:]]
    if first.endswith(".py") or (os.path.isfile(first) and not os.access(first, os.X_OK)):
        if not os.path.exists(first):
            raise CommandError(f"amplint trace: no such file: {first}")
        return [sys.executable, *cmd]
    exe = first if os.sep in first else _which(first)
    if exe is None or not os.path.exists(exe):
        if os.sep in first:
            raise CommandError(f"amplint trace: no such file: {first}")
        raise CommandError(f"amplint trace: command not found: {first} (not a .py file and not on PATH)")
    if _is_python(exe):
        _check_python_args(cmd[1:])
    return [exe, *cmd[1:]]


def _hook_env(out_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    hook = os.path.join(here, "tracehook")
    pkgdir = os.path.dirname(os.path.dirname(here))  # the directory holding the amplint package
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = hook + (os.pathsep + old if old else "")
    env["AMPLINT_TRACE_DIR"] = out_dir
    env["AMPLINT_TRACE_PKGDIR"] = pkgdir
    return env


def _run(cmd: list[str], env: dict[str, str], stdout: Any) -> int:
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=stdout)
    except OSError as exc:
        raise CommandError(f"amplint trace: cannot run {cmd[0]}: {exc.strerror or exc}") from None
    interrupted = False
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:  # the child got the SIGINT too: let it finish its report
            if interrupted:
                proc.kill()
            interrupted = True
    if rc < 0:
        return 128 - rc
    return rc


# ---------------------------------------------------------------------- reports


def _load_reports(out_dir: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    reports, started, errors = [], [], []
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        try:
            if name.startswith("report-") and name.endswith(".json"):
                with open(path, encoding="utf-8") as fh:
                    reports.append(json.load(fh))
            elif name.startswith("started-") and name.endswith(".json"):
                with open(path, encoding="utf-8") as fh:
                    started.append(json.load(fh))
            elif name.startswith("hook-error-"):
                with open(path, encoding="utf-8") as fh:
                    errors.append(fh.read().strip())
        except (OSError, ValueError):
            continue
    return reports, started, errors


def _proc_label(r: dict[str, Any]) -> str:
    return f"rank {r['rank']} (pid {r['pid']})" if r.get("rank") is not None else f"pid {r['pid']}"


def merge_reports(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (code, path, line) across processes, with the summed count and the ranks."""
    merged: dict[tuple[str, str, int], dict[str, Any]] = {}
    order = sorted(reports, key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r["pid"]))
    for r in order:
        for v in r.get("violations", []):
            key = (v["code"], v["path"], v["line"])
            m = merged.get(key)
            if m is None:
                m = merged[key] = {**v, "count": 0, "ranks": [], "pids": []}
            m["count"] += v.get("count", 1)
            if r.get("rank") is not None and r["rank"] not in m["ranks"]:
                m["ranks"].append(r["rank"])
            m["pids"].append(r["pid"])
    return list(merged.values())


def _display(path: str | None) -> str | None:
    """A path as the user would name it: relative to the working directory when inside it."""
    if not path or path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return rel if not rel.startswith(os.pardir) else path


def _violation_line(v: dict[str, Any], n_procs: int) -> str:
    extra = []
    if v["count"] > 1:
        extra.append(f"x{v['count']}")
    if v["ranks"]:
        extra.append("rank" + ("s " if len(v["ranks"]) > 1 else " ") + ", ".join(map(str, sorted(v["ranks"]))))
    elif n_procs > 1:
        extra.append("pid" + ("s " if len(v["pids"]) > 1 else " ") + ", ".join(map(str, v["pids"])))
    return f"{_display(v['path'])}:{v['line']}: {v['code']} {v['message']}" + (
        f" ({'; '.join(extra)})" if extra else "")


def _scaler_groups(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in reports:
        for s in r["stats"]["scalers"]:
            key = (s["type"], s["device"], s["enabled"], s["reason"], s["created_at"])
            g = groups.get(key)
            if g is None:
                g = groups[key] = {**s, "scale": 0, "unscale_": 0, "step": 0, "update": 0, "procs": []}
            for k in ("scale", "unscale_", "step", "update"):
                g[k] += s[k]
            g["procs"].append(_proc_label(r))
    return list(groups.values())


def _unchecked_reason(reports: list[dict[str, Any]]) -> str | None:
    """None when something was checked, else why nothing was.

    Checked means: an enabled GradScaler was used, or (a loop without any GradScaler, e.g.
    bfloat16) backward ran after enabled autocast regions. When every GradScaler is disabled,
    its calls were not checked, whatever else ran.
    """
    scalers = _scaler_groups(reports)
    if any(s["enabled"] and (s["scale"] or s["step"] or s["update"]) for s in scalers):
        return None
    autocast = [a for r in reports for a in r["stats"]["autocast"]]
    backward = sum(r["stats"]["backward"] for r in reports)
    if scalers and all(not s["enabled"] for s in scalers):
        reasons = sorted({s["reason"] or "disabled" for s in scalers})
        what = "the GradScaler is" if len(scalers) == 1 else "every GradScaler is"
        hint = ""
        if any(s["reason"] == "CUDA is not available" for s in scalers):
            hint = (" (a GradScaler for 'cuda', the default device, disables itself without CUDA: "
                    "construct it with the device you train on, e.g. torch.amp.GradScaler(\"cpu\"), "
                    "or trace on a CUDA machine)")
        only = ("; only backward-inside-autocast (AMP002) was checked"
                if any(a["enabled"] for a in autocast) and backward else "")
        return f"{what} disabled: {'; '.join(reasons)}{hint}{only}"
    if scalers:
        return None if backward else "the GradScaler was never used"
    if any(a["enabled"] for a in autocast) and backward:
        return None
    if not reports:
        return "no traced Python process used torch AMP (no GradScaler, autocast, backward or optimizer step)"
    if autocast:
        return "no GradScaler, and every autocast region was disabled"
    return "the program created no GradScaler and entered no autocast region"


def cannot_verify_reason(reports: list[dict[str, Any]], started: list[dict[str, Any]],
                         errors: list[str]) -> str | None:
    """Why "no finding" is not a clean bill (issue 32): nothing was checked (no AMP step seen, every
    GradScaler disabled), a process ended without its report, or amplint's hook failed; else None."""
    why = _unchecked_reason(reports)
    if why is not None:
        return "nothing was checked, see below"
    reported = {r["pid"] for r in reports}
    lost = [s for s in started if s["pid"] not in reported]
    if lost:
        return (f"{len(lost)} process{'es' if len(lost) != 1 else ''} ended without a report, "
                f"so their findings are unknown")
    if errors:
        return "amplint's hook failed in a process, so it could not follow every AMP call"
    return None


def summary_lines(reports: list[dict[str, Any]], started: list[dict[str, Any]], errors: list[str],
                  merged: list[dict[str, Any]]) -> list[str]:
    """The summary ``amplint trace`` ends with (stderr)."""
    lines = []
    n = len(reports)
    procs = ", ".join(_proc_label(r) for r in sorted(
        reports, key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r["pid"])))
    lines.append(f"amplint trace: {n} process{'es' if n != 1 else ''} traced" + (f": {procs}" if n else ""))
    for g in _scaler_groups(reports):
        state = "enabled" if g["enabled"] else f"DISABLED ({g['reason']})"
        where = ""
        if g["created_at"]:
            path, _, line = g["created_at"].rpartition(":")
            where = f" created at {_display(path)}:{line}"
        counts = (f"{g['update']} iteration{'s' if g['update'] != 1 else ''} (scaler.update), "
                  f"{g['step']} scaler.step, {g['scale']} scaler.scale")
        if not g["enabled"]:
            counts += " (not checked)"
        many = f" [{len(g['procs'])} processes]" if len(g["procs"]) > 1 else ""
        lines.append(f"  GradScaler {g['type']}(device={g['device']!r}){where}: {state}; {counts}{many}")
    if reports and not any(r["stats"]["scalers"] for r in reports):
        lines.append("  GradScaler: none seen")
    ac: dict[tuple[str, str, bool], int] = {}
    for r in reports:
        for a in r["stats"]["autocast"]:
            k = (a["device"], a["dtype"], a["enabled"])
            ac[k] = ac.get(k, 0) + a["count"]
    if ac:
        parts = [f"{c} {d} {t}" + ("" if e else " (disabled)") for (d, t, e), c in ac.items()]
        lines.append(f"  autocast regions entered: {', '.join(parts)}")
    bw = sum(r["stats"]["backward"] for r in reports)
    sbw = sum(r["stats"]["scaled_backward"] for r in reports)
    steps = sum(r["stats"]["optimizer_steps"] for r in reports)
    if reports:
        lines.append(f"  backward calls: {bw} ({sbw} scaled); optimizer steps: {steps}")
    reported = {r["pid"] for r in reports}
    for s in started:
        if s["pid"] not in reported:
            lines.append(f"  {_proc_label(s)} ({' '.join(s.get('argv', [])[:2])}) ended without writing its "
                         f"report (killed, os._exit, or crashed in C): its findings are unknown")
    for e in errors:
        lines.append(f"  amplint's hook failed in a process: {e}")
    if merged:
        total = len(merged)
        codes: dict[str, int] = {}
        for v in merged:
            codes[v["code"]] = codes.get(v["code"], 0) + v["count"]
        detail = ", ".join(f"{c} x{k}" for c, k in sorted(codes.items()))
        lines.append(f"  findings: {total} AMP misuse{'s' if total != 1 else ''} ({detail})")
    else:
        cannot = cannot_verify_reason(reports, started, errors)
        lines.append("  findings: none" + (f" (cannot verify: {cannot})" if cannot else ""))
    why = _unchecked_reason(reports)
    if why is not None:
        what = "the GradScaler calls were not checked" if "only backward-inside-autocast" in why else \
            "nothing was checked"
        lines.append(f"amplint trace: {what}: {why} (--fail-if-unchecked makes this exit 1)")
    return lines


# ---------------------------------------------------------------------- in-process (API)


def run_traced(kind: str, target: str, args: list[str]):  # -> (status, Sanitizer)
    """Run the script/module in this process under sanitize(); returns (exit status, sanitizer).

    Unlike :func:`main`, child processes are not followed.
    """
    from amplint.runtime.sanitizer import Sanitizer

    san = Sanitizer(report=False)
    old_argv, old_path = sys.argv[:], sys.path[:]
    status = 0
    try:
        sys.argv = [target, *args]
        if kind == "path":
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        else:
            sys.path.insert(0, os.getcwd())
        with san:
            try:
                if kind == "path":
                    runpy.run_path(target, run_name="__main__")
                else:
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
            except SystemExit as exc:
                code = exc.code
                if code is None:
                    status = 0
                elif isinstance(code, int):
                    status = code
                else:
                    print(code, file=sys.stderr)
                    status = 1
            except BaseException as exc:  # the script failed: show it like python would
                if isinstance(exc, KeyboardInterrupt):
                    status = 130
                else:
                    traceback.print_exc()
                    status = 1
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    return status, san


# ---------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = fail_unchecked = False
    output_file: str | None = None
    while argv and argv[0] != "--" and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt == "--json":
            as_json = True
        elif opt == "--fail-if-unchecked":
            fail_unchecked = True
        elif opt in ("-o", "--output-file"):
            if not argv:
                print(f"{USAGE}\n{opt} needs a file name", file=sys.stderr)
                return 2
            output_file = argv.pop(0)
        elif opt.startswith("--output-file="):
            output_file = opt.split("=", 1)[1]
        elif opt in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print(f"{USAGE}\namplint trace: unknown option {opt!r}", file=sys.stderr)
            return 2
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        cmd = resolve_command(argv)
    except CommandError as exc:
        msg = str(exc)
        print(msg if msg.startswith("amplint trace:") else f"{USAGE}\namplint trace: {msg}", file=sys.stderr)
        return 2
    if output_file is not None:
        try:
            with open(output_file, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            print(f"amplint trace: cannot write {output_file}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="amplint-trace-") as out_dir:
        env = _hook_env(out_dir)
        stdout = 2 if as_json and output_file is None else None  # keep stdout for the JSON
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            status = _run(cmd, env, stdout)
        except CommandError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        reports, started, errors = _load_reports(out_dir)
    merged = merge_reports(reports)
    why = _unchecked_reason(reports)
    if merged:
        code = 1
    elif why is not None and fail_unchecked:
        code = 1
    else:
        code = status
    if as_json:
        text = json.dumps({
            "violations": merged,
            "processes": [{k: r.get(k) for k in ("pid", "ppid", "rank", "local_rank", "world_size", "argv",
                                                 "stats")} for r in reports],
            "checked": why is None, "unchecked_reason": why, "exit_status": code,
            "verdict": "FAIL" if merged else ("cannot verify" if cannot_verify_reason(reports, started, errors)
                                              else "pass"),
            "cannot_verify": None if merged else cannot_verify_reason(reports, started, errors),
            "program_exit_status": status,
        }, indent=2)
    else:
        text = "\n".join(_violation_line(v, len(reports)) for v in merged)
    if output_file is not None:
        with open(output_file, "w", encoding="utf-8") as fh:
            fh.write(text + ("\n" if text else ""))
    elif text:
        print(text)
    sys.stdout.flush()
    for line in summary_lines(reports, started, errors, merged):
        print(line, file=sys.stderr)
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
