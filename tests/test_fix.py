"""`amplint fix`: the canonical rewrites and the guarantees that make a fixer trustworthy."""

from __future__ import annotations

import json
import os
import stat
import textwrap

import pytest

from amplint_testutil import run_amplint

LOOP = textwrap.dedent(
    """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    """
)
FIXED = LOOP + "    scaler.update()\n"


def fix(cwd, *args):
    return run_amplint("fix", "--no-cache", *args, cwd=cwd)


def test_fix_writes_canonical_loop_and_exits_0(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(LOOP)
    r = fix(tmp_path, "t.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert p.read_text() == FIXED
    assert "Found 1 error (1 fixed, 0 remaining)." in r.stdout


def test_check_fix_is_the_same_as_fix(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(LOOP)
    r = run_amplint("check", "--fix", "--no-cache", "t.py", cwd=tmp_path)
    assert r.returncode == 0 and p.read_text() == FIXED


def test_fix_exits_1_when_findings_remain(tmp_path):
    # AMP003's fix is unsafe: without --unsafe-fixes it stays, and fix says so
    src = textwrap.dedent(
        """\
        import torch
        s1 = torch.amp.GradScaler("cuda")
        s2 = torch.amp.GradScaler("cuda")
        for x in loader:
            s1.scale(l1(x)).backward()
            s2.scale(l2(x)).backward()
            s1.step(opt)
            s2.step(opt)
            s1.update()
            s2.update()
        """
    )
    p = tmp_path / "t.py"
    p.write_text(src)
    r = fix(tmp_path, "t.py")
    assert r.returncode == 1
    assert p.read_text() == src
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option" in r.stdout
    r = fix(tmp_path, "--unsafe-fixes", "t.py")
    assert r.returncode == 0, r.stdout
    assert "s2" not in p.read_text()


def test_exit_non_zero_on_fix(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(LOOP)
    assert fix(tmp_path, "--exit-non-zero-on-fix", "t.py").returncode == 1
    assert p.read_text() == FIXED
    assert fix(tmp_path, "--exit-non-zero-on-fix", "t.py").returncode == 0


def test_diff_writes_nothing_and_exits_1(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(LOOP)
    r = run_amplint("check", "--diff", "--no-cache", "t.py", cwd=tmp_path)
    assert r.returncode == 1
    assert p.read_text() == LOOP
    assert "--- t.py" in r.stdout and "+    scaler.update()" in r.stdout
    assert "Would fix 1 error in 1 file." in r.stderr
    p.write_text(FIXED)
    r = run_amplint("check", "--diff", "--no-cache", "t.py", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""


def test_fix_json_reports_what_remains(tmp_path):
    # AMP001 (safe fix: applied) and AMP003 (unsafe fix: not applied without --unsafe-fixes)
    src = textwrap.dedent(
        """\
        import torch

        scaler = torch.amp.GradScaler("cuda")
        s2 = torch.amp.GradScaler("cuda")
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            s2.scale(loss).backward()
            scaler.step(optimizer)
            s2.step(optimizer)
            s2.update()
        """
    )
    p = tmp_path / "t.py"
    p.write_text(src)
    before = run_amplint("check", "--no-cache", "--output-format", "json", "t.py", cwd=tmp_path)
    assert sorted(d["code"] for d in json.loads(before.stdout)) == ["AMP001", "AMP003"]
    r = fix(tmp_path, "--output-format", "json", "t.py")
    assert r.returncode == 1, r.stderr
    assert p.read_text() == src.replace("    scaler.step(optimizer)\n", "    scaler.step(optimizer)\n    scaler.update()\n")
    remaining = json.loads(r.stdout)
    assert [(d["code"], d["location"]["row"], d["fix"]["applicability"]) for d in remaining] == [("AMP003", 4, "unsafe")]


@pytest.mark.parametrize(
    "name,encode",
    [
        ("crlf", lambda s: s.replace("\n", "\r\n").encode()),
        ("bom", lambda s: b"\xef\xbb\xbf" + s.encode()),
        ("latin1", lambda s: ("# -*- coding: latin-1 -*-\n# caf\u00e9 \u00e0 la cr\u00e8me\n" + s).encode("latin-1")),
        ("tabs", lambda s: s.replace("    ", "\t").encode()),
    ],
)
def test_round_trip_encodings_and_line_endings(tmp_path, name, encode):
    src = LOOP.replace('"cuda")\n', '"cuda")  # the scaler\n', 1).replace("for x", "\n# comment kept\nfor x", 1)
    expected = src + "    scaler.update()\n"
    p = tmp_path / "t.py"
    p.write_bytes(encode(src))
    r = fix(tmp_path, "t.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert p.read_bytes() == encode(expected)


def test_only_fixed_statements_change_quotes_and_comments_kept(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        scaler = torch.amp.GradScaler('cuda')   # single quotes, odd spacing


        def train(loader):
            for x in loader:   # a loop
                with torch.autocast('cuda'):
                    loss = model(x)  # forward
                    scaler.scale(loss).backward()  # backward too early
                    # trailing comment in the block
                scaler.step(opt)
                scaler.update()
        """
    )
    p = tmp_path / "t.py"
    p.write_text(src)
    assert fix(tmp_path, "t.py").returncode == 0
    assert p.read_text() == src.replace(
        "            scaler.scale(loss).backward()  # backward too early\n            # trailing comment in the block\n",
        "            # trailing comment in the block\n        scaler.scale(loss).backward()  # backward too early\n",
    )


def test_unchanged_files_are_not_rewritten(tmp_path):
    p = tmp_path / "clean.py"
    p.write_text(FIXED)
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    q = tmp_path / "buggy.py"
    q.write_text(LOOP)
    assert fix(tmp_path, ".").returncode == 0
    assert p.stat().st_mtime_ns == 1_000_000_000
    assert q.read_text() == FIXED


def test_permissions_kept_and_no_temp_files_left(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(LOOP)
    os.chmod(p, 0o640)
    assert fix(tmp_path, "t.py").returncode == 0
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["t.py"]


def test_syntax_error_file_is_reported_and_untouched_others_fixed(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nscaler = torch.amp.GradScaler(\nfor x in y:\n")
    good = tmp_path / "good.py"
    good.write_text(LOOP)
    r = fix(tmp_path, "--output-format", "concise", ".")
    assert r.returncode == 1
    assert bad.read_text() == "import torch\nscaler = torch.amp.GradScaler(\nfor x in y:\n"
    assert good.read_text() == FIXED
    assert "bad.py:2:" in r.stdout and "E999 SyntaxError" in r.stdout


def test_file_changed_on_disk_is_not_overwritten(tmp_path, monkeypatch, capsys):
    """Simulate another process editing the file while fixes are computed."""
    from amplint.fix import apply as fixer
    from amplint.pipeline import Options, run_check

    p = tmp_path / "t.py"
    p.write_text(LOOP)
    real = fixer.fix_text

    calls = []

    def racing_fix_text(text, path, want, max_passes=10):
        calls.append(path)
        out = real(text, path, want, max_passes)
        p.write_text(LOOP + "# edited meanwhile\n")
        return out

    monkeypatch.setattr(fixer, "fix_text", racing_fix_text)
    monkeypatch.chdir(tmp_path)
    opts = Options.from_cli(
        dict(paths=("t.py",), fix=True, unsafe_fixes=False, diff=False, exit_zero=False, exit_non_zero_on_fix=False,
             statistics=False, output_format="concise", output_file=None, select=None, extend_select=None, ignore=None,
             preview=None, target_torch_version=None, no_cache=True, cache_dir=None, config_path=None, isolated=True,
             force_exclude=None, stdin_filename=None, add_noqa=False, show_files=False, quiet=False, jobs=1)
    )
    assert run_check(opts) == 1
    assert calls == ["t.py"]  # the fix was computed (and the file edited meanwhile) ...
    assert p.read_text() == LOOP + "# edited meanwhile\n"  # ... but not written over the edit
    out = capsys.readouterr().out
    assert "t.py:1:1: E902 file changed on disk while fixing; left untouched" in out
