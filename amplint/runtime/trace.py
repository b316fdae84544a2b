"""Run a Python training script under the AMP sanitizer and print what it caught.

Usage::

    python -m amplint.runtime.trace [--json] -- script.py ARGS...
    python -m amplint.runtime.trace [--json] -- python script.py ARGS...
    python -m amplint.runtime.trace [--json] -- python -m package.module ARGS...

The script runs in this process (``runpy``, ``sys.argv`` set to ``[script, *ARGS]``, its
directory first on ``sys.path``) inside :func:`amplint.runtime.sanitizer.sanitize`. Each
violation is printed to stdout as ``path:line: AMPxxx message`` (with ``--json``, one JSON
array of objects with ``code``, ``message``, ``path``, ``line``, ``count``). Exit status: 1 when
there are violations, otherwise the script's own exit status (1 if it raised).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
import traceback
from typing import Sequence

__all__ = ["main", "run_traced", "split_command"]

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")

USAGE = "usage: python -m amplint.runtime.trace [--json] -- [python] script.py [ARGS...]"


def split_command(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """``[python] script.py ARGS`` or ``[python] -m mod ARGS`` -> (kind, target, args)."""
    argv = list(argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv and (_PYTHON.match(os.path.basename(argv[0])) or argv[0] == sys.executable):
        argv = argv[1:]
    if not argv:
        raise ValueError("no script given")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise ValueError("-m needs a module name")
        return "module", argv[1], argv[2:]
    if argv[0].startswith("-"):
        raise ValueError(f"unsupported python option {argv[0]!r}: give the script path")
    return "path", argv[0], argv[1:]


def run_traced(kind: str, target: str, args: list[str]):  # -> (status, Sanitizer)
    """Run the script/module under sanitize(); returns (exit status, sanitizer)."""
    from amplint.runtime.sanitizer import Sanitizer

    san = Sanitizer(report=False)
    old_argv, old_path = sys.argv[:], sys.path[:]
    status = 0
    try:
        if kind == "path":
            sys.argv = [target, *args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        else:
            sys.argv = [target, *args]
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = False
    while argv and argv[0] != "--" and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt == "--json":
            as_json = True
        elif opt in ("-h", "--help"):
            print(USAGE)
            print(__doc__)
            return 0
        else:
            print(f"{USAGE}\nunknown option {opt!r}", file=sys.stderr)
            return 2
    try:
        kind, target, args = split_command(argv)
    except ValueError as exc:
        print(f"{USAGE}\n{exc}", file=sys.stderr)
        return 2
    if kind == "path" and not os.path.exists(target):
        print(f"amplint trace: no such file: {target}", file=sys.stderr)
        return 2
    status, san = run_traced(kind, target, args)
    sys.stdout.flush()
    sys.stderr.flush()
    if as_json:
        print(json.dumps([v.as_dict() for v in san.violations], indent=2))
    else:
        for v in san.violations:
            print(str(v) + (f" (x{v.count})" if v.count > 1 else ""))
        if san.violations:
            n = len(san.violations)
            print(f"amplint trace: {n} AMP misuse{'s' if n != 1 else ''} found", file=sys.stderr)
    sys.stdout.flush()
    return 1 if san.violations else status


if __name__ == "__main__":
    sys.exit(main())
