"""Helpers for the robustness suite: hostile trees and the real entry point, optionally with
faults injected into the amplint process (and, through fork, into its workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A file amplint must flag (AMP001: scaler.step() without scaler.update()).
FLAGGED = textwrap.dedent(
    """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x in data:
        with torch.autocast("cuda"):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(opt)
    """
)
FLAGGED_ROW = 8  # the row of `scaler.step(opt)` in FLAGGED
FIXED = FLAGGED + "    scaler.update()\n"

HUMAN = ("full", "concise")
FORMATS = ["full", "concise", "json", "json-lines", "github"]


def extra_formats() -> list[str]:
    """The CI formats (every format but the text ones)."""
    from amplint.report import FORMATS

    return [f for f in ("sarif", "gitlab", "junit") if f in FORMATS]


def _env(env=None) -> dict:
    e = dict(os.environ)
    for k in ("AMPLINT_OUTPUT_FORMAT", "AMPLINT_CACHE_DIR"):
        e.pop(k, None)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return e


def run(*args, cwd=None, env=None, timeout=120, input=None):
    """`python -m amplint ARGS` (bytes in, text out with surrogateescape: odd file names survive)."""
    p = subprocess.run(
        [sys.executable, "-m", "amplint", *map(str, args)],
        cwd=cwd, env=_env(env), capture_output=True, timeout=timeout, input=input,
    )
    return _decode(p)


def run_patched(prelude: str, *args, cwd=None, env=None, timeout=120):
    """Run the CLI in a fresh interpreter after executing ``prelude`` (which monkeypatches
    amplint or the os module). Pool workers are forked, so they inherit the patch."""
    code = prelude + "\nimport sys\nfrom amplint.cli import main\nmain(sys.argv[1:])\n"
    p = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd, env=_env(env), capture_output=True, timeout=timeout,
    )
    return _decode(p)


def _decode(p):
    p.stdout = p.stdout.decode("utf-8", "surrogateescape")
    p.stderr = p.stderr.decode("utf-8", "surrogateescape")
    return p


def entries(fmt: str, stdout: str, cwd=None) -> list[tuple[str, str, int]]:
    """(path, code, row) of every reported entry, parsed from any output format."""
    out = []
    if fmt in ("json", "json-lines"):
        objs = json.loads(stdout) if fmt == "json" else [json.loads(l) for l in stdout.splitlines() if l.strip()]
        for o in objs:
            name = o["filename"]  # absolute, as ruff's: relative to the run's cwd here
            if cwd is not None and os.path.isabs(name):
                name = os.path.relpath(name, cwd)
            out.append((name, o["code"], o["location"]["row"]))
    elif fmt == "github":
        for line in stdout.splitlines():
            level, sep, rest = line.partition(" ")
            assert sep and level in ("::error", "::warning"), line
            props, _, _msg = rest.partition("::")
            kv = dict(p.split("=", 1) for p in props.split(","))
            path = kv["file"].replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")
            code = kv["title"].replace("%3A", ":").replace("%2C", ",")[len("amplint ("):-1]
            out.append((path, code, int(kv["line"])))
    elif fmt in HUMAN:
        import re

        # `path:row:col: CODE` (a path may itself hold colons, so match from the right)
        for line in stdout.splitlines():
            m = re.match(r"^(.*):(\d+):(\d+): ([A-Z]+\d+)\b", line)
            if m:
                out.append((m.group(1), m.group(4), int(m.group(2))))
    elif fmt == "sarif":
        from urllib.parse import unquote

        for r in json.loads(stdout)["runs"][0]["results"]:
            loc = r["locations"][0]["physicalLocation"]
            out.append((unquote(loc["artifactLocation"]["uri"]), r["ruleId"], loc["region"]["startLine"]))
    elif fmt == "gitlab":
        for o in json.loads(stdout):
            out.append((o["location"]["path"], o["check_name"], o["location"]["positions"]["begin"]["line"]))
    elif fmt == "junit":
        import xml.etree.ElementTree as ET

        for case in ET.fromstring(stdout).iter("testcase"):
            for fail in case.iter("failure"):
                out.append((case.get("file"), fail.get("type"), int(case.get("line"))))
    else:
        raise ValueError(fmt)
    return [(_norm(p), c, r) for p, c, r in out]


def _norm(path: str) -> str:
    path = path.replace(os.sep, "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def reported_errors(stdout: str) -> dict[str, str]:
    """{path: message} of the per-file errors (E902, E999, AMP900, AMP901) in full or concise
    output: each is reported once, on stdout, like a finding (issue 13)."""
    import re

    out = {}
    for line in stdout.splitlines():
        m = re.match(r"(.+?):(?:cell \d+:)?\d+:\d+: (?:E902|E999|AMP900|AMP901) (.*)$", line)
        if m:
            out[_norm(m.group(1))] = m.group(2)
    return out


def stderr_errors(stderr: str) -> dict[str, str]:
    """{path: message} of the per-file `PATH: error: MESSAGE` lines on stderr."""
    out = {}
    for line in stderr.splitlines():
        path, sep, msg = line.partition(": error: ")
        if sep and not line.startswith("error: "):
            out[_norm(path)] = msg
    return out
