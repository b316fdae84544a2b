"""I/O faults while checking: unreadable files, files that vanish or change kind between
discovery and reading. Injected into the real CLI process (and its forked workers)."""

from __future__ import annotations

import os

import pytest

from robustness_util import FLAGGED, FLAGGED_ROW, entries, run, run_patched, stderr_errors

DENY = """
import errno, os
_real_open = os.open
def _open(path, flags, *a, **k):
    if os.path.basename(os.fsdecode(path)) == "secret.py":
        raise PermissionError(errno.EACCES, "Permission denied", path)
    return _real_open(path, flags, *a, **k)
os.open = _open
"""

VANISH = """
import os, amplint.discover as D
_real = D.discover
def discover(*a, **k):
    found = _real(*a, **k)
    for f in found.files:
        name = os.path.basename(f)
        if name == "vanishing.py":
            os.unlink(f)
        elif name == "now_a_dir.py":
            os.unlink(f)
            os.mkdir(f)
    return found
D.discover = discover
"""


def _tree(root, n_good: int, extra: dict[str, str]):
    for i in range(n_good):
        (root / f"good_{i:02d}.py").write_text(FLAGGED)
    for name, text in extra.items():
        (root / name).write_text(text)


@pytest.mark.parametrize("n_good", [2, 30], ids=["serial", "pool"])
@pytest.mark.parametrize("fmt", ["concise", "json"])
def test_permission_denied_is_a_per_file_error(tmp_path, n_good, fmt):
    _tree(tmp_path, n_good, {"secret.py": FLAGGED})
    p = run_patched(DENY, "check", ".", "--no-cache", "-j", "2", "--output-format", fmt, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    got = entries(fmt, p.stdout)
    assert ("secret.py", "E902", 1) in got
    assert [e for e in got if e[0] == "secret.py"] == [("secret.py", "E902", 1)]
    for i in range(n_good):
        assert (f"good_{i:02d}.py", "AMP001", FLAGGED_ROW) in got
    if fmt == "concise":
        assert stderr_errors(p.stderr)["secret.py"] == "Permission denied"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_chmod_000_file_is_a_per_file_error(tmp_path):
    _tree(tmp_path, 1, {"secret.py": FLAGGED})
    os.chmod(tmp_path / "secret.py", 0)
    try:
        p = run("check", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    finally:
        os.chmod(tmp_path / "secret.py", 0o644)
    assert p.returncode == 1
    assert "secret.py:1:1: E902 Permission denied" in p.stdout


@pytest.mark.parametrize("n_good", [2, 30], ids=["serial", "pool"])
def test_files_that_vanish_or_become_directories_after_discovery(tmp_path, n_good):
    _tree(tmp_path, n_good, {"vanishing.py": FLAGGED, "now_a_dir.py": FLAGGED})
    p = run_patched(VANISH, "check", ".", "--no-cache", "-j", "2", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "vanishing.py:1:1: E902 No such file or directory" in p.stdout
    assert "now_a_dir.py:1:1: E902 Is a directory" in p.stdout
    assert sum(1 for e in entries("concise", p.stdout) if e[1] == "AMP001") == n_good
    errs = stderr_errors(p.stderr)
    assert errs["vanishing.py"] == "No such file or directory"


def test_file_vanishing_before_fix_is_reported_not_crashed(tmp_path):
    """`fix` reads the file again before fixing: gone by then -> E902, the rest is fixed."""
    _tree(tmp_path, 2, {})
    (tmp_path / "late.py").write_text(FLAGGED)
    prelude = """
import os, amplint.fixer_driver as FD
_real = FD.fix_files
def fix_files(results, *a, **k):
    os.unlink("late.py")
    return _real(results, *a, **k)
FD.fix_files = fix_files
"""
    p = run_patched(prelude, "fix", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "late.py:1:1: E902 No such file or directory" in p.stdout
    assert "Traceback" not in p.stderr
    for i in range(2):
        assert (tmp_path / f"good_{i:02d}.py").read_text().endswith("scaler.update()\n")


def test_stdin_with_undecodable_bytes(tmp_path):
    p = run("check", "-", "--stdin-filename", "x.py", "--no-cache", input=b'GradScaler = "caf\xe9"\n', cwd=tmp_path)
    assert p.returncode == 1
    assert "x.py:1:1: E902" in p.stdout
