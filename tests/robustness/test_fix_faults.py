"""`fix` never loses a byte: a hard kill at any point of the write leaves the original intact
(at worst a hidden .amplint-*.tmp beside it), unwritable files are reported, files changed
while fixing are left alone, symlinks stay symlinks, encodings and line endings survive."""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace

import pytest

from amplint import source
from amplint.fix import files as fixer_driver
from amplint.analyze import analyze_path
from robustness_util import FIXED, FLAGGED, run, run_patched

# A hard kill (SIGKILL: no finally blocks, no atexit) at a chosen point of source.atomic_write.
KILL_AT = {
    # half of the new content written to the temp file, then killed
    "write": """
import os, signal, amplint.source as S
_real_fdopen = os.fdopen
class _Half:
    def __init__(self, fh): self.fh = fh
    def __enter__(self): return self
    def __exit__(self, *a): return self.fh.__exit__(*a)
    def write(self, data):
        self.fh.write(data[: len(data) // 2]); self.fh.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    def __getattr__(self, name): return getattr(self.fh, name)
def fdopen(fd, *a, **k):
    return _Half(_real_fdopen(fd, *a, **k))
S.os = type(os)("os_proxy"); S.os.__dict__.update(os.__dict__); S.os.fdopen = fdopen
""",
    # the temp file complete and synced, killed before the rename
    "replace": """
import os, signal, amplint.source as S
S.os = type(os)("os_proxy"); S.os.__dict__.update(os.__dict__)
S.os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
""",
}


def _listing(d):
    return sorted(os.listdir(d))


@pytest.mark.parametrize("point", sorted(KILL_AT))
def test_hard_kill_during_write_keeps_the_original(tmp_path, point):
    f = tmp_path / "train.py"
    original = FLAGGED.replace("\n", "\r\n").encode()
    f.write_bytes(original)
    p = run_patched(KILL_AT[point], "fix", "train.py", "--no-cache", cwd=tmp_path)
    assert p.returncode == -9, (p.returncode, p.stderr)  # it really was killed mid-write
    assert f.read_bytes() == original  # byte-identical
    left = [n for n in _listing(tmp_path) if n != "train.py"]
    # all a hard kill can leave: hidden temp files, which discovery never picks up
    assert all(n.startswith(".amplint-") and n.endswith(".tmp") for n in left), left
    assert len(left) <= 1
    # the next run is unaffected
    p = run("fix", ".", "--no-cache", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_failed_rename_cleans_up_and_reports(tmp_path):
    prelude = """
import errno, os, amplint.source as S
S.os = type(os)("os_proxy"); S.os.__dict__.update(os.__dict__)
def _replace(src, dst):
    raise OSError(errno.EXDEV, "Invalid cross-device link")
S.os.replace = _replace
"""
    (tmp_path / "a.py").write_text(FLAGGED)
    p = run_patched(prelude, "fix", "a.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "a.py:1:1: E902 cannot write fixes: Invalid cross-device link" in p.stdout
    assert (tmp_path / "a.py").read_text() == FLAGGED
    assert _listing(tmp_path) == ["a.py"]  # the temp file was removed


READ_ONLY_DIR = """
import errno, os, tempfile
_real = tempfile.mkstemp
def mkstemp(*a, dir=None, **k):
    if dir and os.path.basename(dir) == "ro":
        raise PermissionError(errno.EACCES, "Permission denied", dir)
    return _real(*a, dir=dir, **k)
tempfile.mkstemp = mkstemp
"""


def test_read_only_directory_is_reported_and_the_rest_fixed(tmp_path):
    """As root a chmod 555 directory is still writable, so the refusal is injected."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "locked.py").write_text(FLAGGED)
    (tmp_path / "ok.py").write_text(FLAGGED)
    p = run_patched(READ_ONLY_DIR, "fix", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "ro/locked.py:1:1: E902 cannot write fixes: Permission denied" in p.stdout
    assert "locked.py" not in p.stderr  # reported once, on stdout
    assert (tmp_path / "ro" / "locked.py").read_text() == FLAGGED
    assert (tmp_path / "ok.py").read_text() == FIXED
    assert _listing(tmp_path / "ro") == ["locked.py"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into a chmod 555 directory anyway")
def test_real_read_only_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    (d / "locked.py").write_text(FLAGGED)
    os.chmod(d, 0o555)
    try:
        p = run("fix", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    finally:
        os.chmod(d, 0o755)
    assert p.returncode == 1
    assert "E902 cannot write fixes" in p.stdout
    assert (d / "locked.py").read_text() == FLAGGED


def test_read_only_file_is_reported_and_left_alone(tmp_path):
    """Issue 11 item 10: a file its owner cannot write (0444; root included) is not rewritten."""
    f = tmp_path / "ro.py"
    f.write_text(FLAGGED)
    os.chmod(f, 0o444)
    p = run("fix", "ro.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "ro.py:1:1: E902 read-only, not fixed" in p.stdout
    assert f.read_text() == FLAGGED
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o444


def test_hard_linked_file_is_fixed_in_place(tmp_path):
    """Issue 11 item 10: both names of a hard-linked file see the fix (same inode)."""
    f = tmp_path / "a.py"
    f.write_text(FLAGGED)
    other = tmp_path / "b_link.txt"
    os.link(f, other)
    inode = os.stat(f).st_ino
    p = run("fix", "a.py", "--no-cache", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert f.read_text() == FIXED
    assert other.read_text() == FIXED
    assert os.stat(f).st_ino == inode and os.stat(f).st_nlink == 2


def test_fix_keeps_owner_and_group(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    f = tmp_path / "owned.py"
    f.write_text(FLAGGED)
    os.chown(f, 1234, 5678)
    p = run("fix", "owned.py", "--no-cache", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert f.read_text() == FIXED
    st = os.stat(f)
    assert (st.st_uid, st.st_gid) == (1234, 5678)
def test_symlink_is_kept_and_its_target_fixed(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "train.py"
    target.write_text(FLAGGED)
    link = tmp_path / "link.py"
    link.symlink_to(os.path.join("real", "train.py"))
    p = run("fix", "link.py", "--no-cache", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "train.py")
    assert target.read_text() == FIXED
    assert sorted(os.listdir(tmp_path / "real")) == ["train.py"]


@pytest.mark.parametrize(
    "name,before,after",
    [
        ("crlf", FLAGGED.replace("\n", "\r\n").encode(), FIXED.replace("\n", "\r\n").encode()),
        ("bom", b"\xef\xbb\xbf" + FLAGGED.encode(), b"\xef\xbb\xbf" + FIXED.encode()),
        ("latin1", b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + FLAGGED.encode(), b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXED.encode()),
        ("tabs", FLAGGED.replace("    ", "\t").encode(), FIXED.replace("    ", "\t").encode()),
        ("formfeed", b"\x0c\n" + FLAGGED.encode(), b"\x0c\n" + FIXED.encode()),
    ],
)
def test_fix_keeps_every_other_byte(tmp_path, name, before, after):
    f = tmp_path / f"{name}.py"
    f.write_bytes(before)
    p = run("fix", f.name, "--no-cache", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f.read_bytes() == after


def _fix_in_process(path):
    result, _ = analyze_path(str(path))
    opts = SimpleNamespace(unsafe_fixes=False, add_noqa=False, diff=False)
    filt = SimpleNamespace(keep=lambda path, d, lines: True)
    return fixer_driver.fix_files([result], opts, filt, {})


def test_file_changed_between_read_and_write_is_left_alone(tmp_path, monkeypatch):
    """fixer_driver reads, fixes, then source.atomic_write compares with the disk: an editor
    that saved meanwhile wins (ChangedOnDisk), reported as E902, no temp file left."""
    f = tmp_path / "train.py"
    f.write_text(FLAGGED)
    edited = FLAGGED + "# saved by an editor meanwhile\n"
    import amplint.fix.apply as fixer

    real_fix_text = fixer.fix_text

    def fix_text_then_edit(*a, **k):
        out = real_fix_text(*a, **k)
        f.write_text(edited)  # between the read and the write
        return out

    monkeypatch.setattr(fixer, "fix_text", fix_text_then_edit)
    out, fixed, diffs, failures = _fix_in_process(f)
    assert fixed == 0
    assert [(m.code, m.message) for m in failures] == [("E902", "file changed on disk while fixing; left untouched")]
    assert f.read_text() == edited
    assert _listing(tmp_path) == ["train.py"]


def test_change_during_the_temp_write_is_detected(tmp_path, monkeypatch):
    """The comparison runs after the temp file is written, right before the rename."""
    f = tmp_path / "train.py"
    f.write_text(FLAGGED)
    src = source.read_source(str(f))
    real_fsync = os.fsync

    def fsync_then_edit(fd):
        real_fsync(fd)
        f.write_text("x = 1\n")

    monkeypatch.setattr(source.os, "fsync", fsync_then_edit)
    with pytest.raises(source.ChangedOnDisk):
        source.atomic_write(src, FIXED)
    assert f.read_text() == "x = 1\n"
    assert _listing(tmp_path) == ["train.py"]


def test_changed_on_disk_through_the_cli(tmp_path):
    (tmp_path / "a.py").write_text(FLAGGED)
    (tmp_path / "b.py").write_text(FLAGGED)
    prelude = """
import amplint.fix.apply as F
_real = F.fix_text
def fix_text(text, path, *a, **k):
    out = _real(text, path, *a, **k)
    if path.endswith("a.py"):
        with open(path, "a") as fh:
            fh.write("# edited\\n")
    return out
F.fix_text = fix_text
"""
    p = run_patched(prelude, "fix", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "a.py:1:1: E902 file changed on disk while fixing; left untouched" in p.stdout
    assert (tmp_path / "a.py").read_text() == FLAGGED + "# edited\n"
    assert (tmp_path / "b.py").read_text() == FIXED


def test_deeply_nested_but_valid_file_is_left_untouched_by_fix(tmp_path):
    """Legal code too deep for LibCST's recursive visitors: reported, not fixed, no crash."""
    deep = FLAGGED + "y = " + "+".join(["a"] * 600) + "\n"
    (tmp_path / "deep.py").write_text(deep)
    (tmp_path / "ok.py").write_text(FLAGGED)
    p = run("fix", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert (tmp_path / "ok.py").read_text() == FIXED
    if (tmp_path / "deep.py").read_text() != deep:  # a LibCST that copes: then it must be right
        assert (tmp_path / "deep.py").read_text() == FIXED + "y = " + "+".join(["a"] * 600) + "\n"
    else:
        assert p.returncode == 1
        assert "deep.py:1:1: E999 cannot fix: too deeply nested for the fixer" in p.stdout


@pytest.mark.parametrize(
    "data",
    [b'GradScaler = "\n', b"GradScaler = " + b"+".join([b"a"] * 100_000) + b"\n", b"GradScaler = 1\x00\n"],
    ids=["unterminated", "deep", "null"],
)
def test_stdin_fix_of_an_unparsable_buffer_echoes_it_and_exits_one(tmp_path, data):
    """An editor's format-on-save pipes the buffer through `fix -`: what comes back must be the
    buffer, byte for byte, and the exit code must say it was not checked."""
    p = run("fix", "-", "--stdin-filename", "buf.py", "--no-cache", input=data, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert p.stdout.encode("utf-8", "surrogateescape") == data
    assert "buf.py:1:" in p.stderr and ": error: E999" in p.stderr


def test_file_libcst_cannot_parse_is_reported_and_left_alone(tmp_path):
    """Found by the long fuzz run: Python accepts a backslash continuation before an indented
    statement, LibCST does not. `fix` reports it per file and leaves it byte-identical."""
    src = FLAGGED.replace("for x in data:\n", "for x in data:\n    \\\n")  # the block opens with `\`
    assert src != FLAGGED
    f = tmp_path / "cont.py"
    f.write_text(src)
    (tmp_path / "ok.py").write_text(FLAGGED)
    p = run("fix", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "cont.py:1:1: E999 cannot fix: LibCST cannot parse it" in p.stdout
    assert "Traceback" not in p.stderr
    assert f.read_text() == src
    assert (tmp_path / "ok.py").read_text() == FIXED
