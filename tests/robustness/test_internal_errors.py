"""A rule that crashes on one file, a file that takes too long, a worker that dies: contained
to that file, reported with the rule code and a hint to report the bug; every other rule and
file still runs; exit 2 for internal errors (1 for a timeout, a per-file condition)."""

from __future__ import annotations

import textwrap

import pytest

from robustness_util import FLAGGED, FLAGGED_ROW, entries, reported_errors, run, run_patched

# Replace AMP001's check with one that misbehaves on files holding a marker.
PATCH = """
import os, signal
from amplint.rules import ALL_RULES
_rule = ALL_RULES["AMP001"]
_real = _rule.check
def check(model):
    if "BOOM_MARKER" in model.source:
        raise ValueError("injected failure")
    if "SLOW_MARKER" in model.source:
        while True:
            pass
    if "DIE_MARKER" in model.source:
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(model)
_rule.check = check
"""

# AMP002 (backward inside autocast) flags this too, so the file has another rule's finding.
BOOM = FLAGGED + textwrap.dedent(
    """\
    for x in data:
        with torch.autocast("cuda"):
            loss = model(x)
            loss.backward()
    # BOOM_MARKER
    """
)


def _tree(root, n_good, special: dict[str, str]):
    for i in range(n_good):
        (root / f"good_{i:02d}.py").write_text(FLAGGED)
    for name, text in special.items():
        (root / name).write_text(text)


@pytest.mark.parametrize("n_good", [2, 30], ids=["serial", "pool"])
@pytest.mark.parametrize("fmt", ["full", "json", "github"])
def test_rule_crash_on_one_file_is_contained(tmp_path, n_good, fmt):
    _tree(tmp_path, n_good, {"boom.py": BOOM})
    p = run_patched(PATCH, "check", ".", "--no-cache", "-j", "2", "--output-format", fmt, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    got = entries(fmt, p.stdout, cwd=tmp_path)
    boom = [e for e in got if e[0] == "boom.py"]
    assert ("boom.py", "AMP900", 1) in boom
    assert any(code == "AMP002" for _, code, _ in boom), boom  # the other rules still ran on it
    assert not any(code == "AMP001" for _, code, _ in boom)
    for i in range(n_good):  # and the other files were checked by every rule
        assert (f"good_{i:02d}.py", "AMP001", FLAGGED_ROW) in got
    if fmt == "full":
        msg = reported_errors(p.stdout)["boom.py"]
        assert msg.startswith("internal error in AMP001: ValueError: injected failure")
        assert "this is a bug in amplint; please report it" in msg


def test_internal_errors_are_not_cached(tmp_path):
    _tree(tmp_path, 1, {"boom.py": BOOM})
    cache = tmp_path / ".cache"
    p = run_patched(PATCH, "check", ".", "--cache-dir", cache, "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 2
    p = run("check", ".", "--cache-dir", cache, "--output-format", "concise", cwd=tmp_path)  # the bug is fixed
    assert p.returncode == 1, p.stdout
    assert "AMP900" not in p.stdout and "boom.py:8:5: AMP001" in p.stdout


def test_exit_zero_does_not_hide_internal_errors(tmp_path):
    _tree(tmp_path, 1, {"boom.py": BOOM})
    p = run_patched(PATCH, "check", ".", "--no-cache", "--exit-zero", cwd=tmp_path)
    assert p.returncode == 2


@pytest.mark.parametrize("n_good", [2, 30], ids=["serial", "pool"])
def test_per_file_timeout(tmp_path, n_good):
    _tree(tmp_path, n_good, {"slow.py": FLAGGED + "# SLOW_MARKER\n"})
    p = run_patched(PATCH, "check", ".", "--no-cache", "-j", "2", "--per-file-timeout", "1", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "slow.py:1:1: AMP901 timeout: analysis took longer than 1 s (see --per-file-timeout)" in p.stdout
    assert reported_errors(p.stdout)["slow.py"].startswith("timeout: analysis took longer than 1 s")
    assert sum(1 for e in entries("concise", p.stdout) if e[1] == "AMP001") == n_good


def test_timeouts_are_not_cached(tmp_path):
    _tree(tmp_path, 0, {"slow.py": FLAGGED + "# SLOW_MARKER\n"})
    cache = tmp_path / ".cache"
    p = run_patched(PATCH, "check", ".", "--cache-dir", cache, "--per-file-timeout", "0.5", "--output-format", "concise", cwd=tmp_path)
    assert "AMP901" in p.stdout
    p = run("check", ".", "--cache-dir", cache, "--output-format", "concise", cwd=tmp_path)
    assert "AMP901" not in p.stdout and f"slow.py:{FLAGGED_ROW}:5: AMP001" in p.stdout


def test_per_file_timeout_rejects_nonsense(tmp_path):
    p = run("check", ".", "--per-file-timeout", "-3", cwd=tmp_path)
    assert p.returncode == 2
    assert "--per-file-timeout" in p.stderr


def test_worker_killed_in_the_pool_is_contained(tmp_path):
    """A worker that dies (SIGKILL, OOM killer, a crash in C) breaks the whole pool; the files
    it left unfinished are re-run one per process, so only the culprit is reported."""
    _tree(tmp_path, 30, {"die.py": FLAGGED + "# DIE_MARKER\n"})
    p = run_patched(PATCH, "check", ".", "--no-cache", "-j", "2", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "die.py:1:1: AMP900 internal error: the worker process checking this file died" in p.stdout
    assert sum(1 for e in entries("concise", p.stdout) if e[1] == "AMP001") == 30
    assert sum(1 for e in entries("concise", p.stdout) if e[1] == "AMP900") == 1
