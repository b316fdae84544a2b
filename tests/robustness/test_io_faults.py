"""I/O faults while checking: unreadable files, files that vanish or change kind between
discovery and reading. Injected into the real CLI process (and its forked workers)."""

from __future__ import annotations

import os

import pytest

from robustness_util import FLAGGED, FLAGGED_ROW, entries, reported_errors, run, run_patched

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
    got = entries(fmt, p.stdout, cwd=tmp_path)
    assert ("secret.py", "E902", 1) in got
    assert [e for e in got if e[0] == "secret.py"] == [("secret.py", "E902", 1)]
    for i in range(n_good):
        assert (f"good_{i:02d}.py", "AMP001", FLAGGED_ROW) in got
    if fmt == "concise":
        assert reported_errors(p.stdout)["secret.py"] == "Permission denied"


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
    errs = reported_errors(p.stdout)
    assert errs["vanishing.py"] == "No such file or directory"


def test_file_vanishing_before_fix_is_reported_not_crashed(tmp_path):
    """`fix` reads the file again before fixing: gone by then -> E902, the rest is fixed."""
    _tree(tmp_path, 2, {})
    (tmp_path / "late.py").write_text(FLAGGED)
    prelude = """
import os, amplint.fix.files as FD
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


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_damaged_cache_is_ignored(tmp_path, damage):
    import glob

    (tmp_path / "a.py").write_text(FLAGGED)
    cache = tmp_path / "cache"
    assert run("check", ".", "--cache-dir", cache, cwd=tmp_path).returncode == 1
    pickles = glob.glob(str(cache / "**" / "*.pickle"), recursive=True)
    assert pickles
    for p in pickles:
        data = open(p, "rb").read()
        with open(p, "wb") as fh:
            fh.write({"garbage": os.urandom(512), "truncated": data[: len(data) // 2], "empty": b""}[damage])
    p = run("check", ".", "--cache-dir", cache, "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"a.py:{FLAGGED_ROW}:5: AMP001" in p.stdout


def test_cache_dir_that_is_a_file_is_ignored(tmp_path):
    """The default .amplint_cache is a file (a checkout gone odd): run without a cache."""
    (tmp_path / "pyproject.toml").write_text("[tool.amplint]\n")
    (tmp_path / "a.py").write_text(FLAGGED)
    (tmp_path / ".amplint_cache").write_text("not a directory\n")
    for _ in range(2):
        p = run("check", ".", "--output-format", "concise", cwd=tmp_path)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert f"a.py:{FLAGGED_ROW}:5: AMP001" in p.stdout
    assert (tmp_path / ".amplint_cache").read_text() == "not a directory\n"
    # given explicitly, it is a usage error (exit 2), as click reports it
    p = run("check", ".", "--cache-dir", tmp_path / ".amplint_cache", cwd=tmp_path)
    assert p.returncode == 2 and "is a file" in p.stderr


def test_unwritable_output_file_is_a_usage_error(tmp_path):
    (tmp_path / "a.py").write_text(FLAGGED)
    (tmp_path / "file").write_text("")
    p = run("check", ".", "--no-cache", "-o", tmp_path / "file" / "report.txt", cwd=tmp_path)
    assert p.returncode == 2
    assert "error: cannot write the report to" in p.stderr and "Traceback" not in p.stderr


def test_reader_closing_the_pipe_is_not_a_crash(tmp_path):
    """`amplint check | head -1`: the reader leaves before the report is written. (Injected:
    whether a real pipe raises EPIPE depends on the pipe buffer and the timing.)"""
    prelude = """
import errno, sys
class _ClosedPipe:
    def __init__(self, real): self.real = real
    def write(self, s): raise BrokenPipeError(errno.EPIPE, "Broken pipe")
    def flush(self): pass
    def __getattr__(self, name): return getattr(self.real, name)
sys.stdout = _ClosedPipe(sys.stdout)
"""
    (tmp_path / "a.py").write_text(FLAGGED)
    p = run_patched(prelude, "check", ".", "--no-cache", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "crashed" not in p.stderr, p.stderr
