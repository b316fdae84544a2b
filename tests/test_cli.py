"""The CLI through its real entry point: exit codes, formats, config, noqa, selection."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from amplint_testutil import run_amplint

BUGGY = textwrap.dedent(
    """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
        optimizer.step()
    """
)
CLEAN = textwrap.dedent(
    """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
)


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def check(proj, *args):
    return run_amplint("check", "--no-cache", *args, cwd=proj)


def test_version():
    from amplint import __version__

    r = run_amplint("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"amplint {__version__}"


def test_clean_exits_0(proj):
    r = check(proj, "clean.py")
    assert r.returncode == 0
    assert "All checks passed!" in r.stdout


def test_findings_exit_1_full_format(proj):
    r = check(proj, "buggy.py")
    assert r.returncode == 1
    out = r.stdout
    assert "buggy.py:7:9: AMP002 [warning] [*] `backward()` inside an autocast region" in out
    assert "buggy.py:8:5: AMP004 [*]" in out
    # source line with a caret under the finding
    assert "7 |         scaler.scale(loss).backward()" in out
    assert "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ AMP002" in out
    assert "Found 1 error and 1 warning." in out
    assert "[*] 2 fixable with `amplint fix`" in out


def test_concise_and_directory_walk(proj):
    r = check(proj, "--output-format", "concise", ".")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("buggy.py:7:9: AMP002")  # walked from `.`, shown without `./`
    assert lines[1].endswith("(unscales, skips inf/NaN steps)")
    assert lines[-2] == "Found 1 error and 1 warning."


def test_json_has_ruff_fields(proj):
    r = check(proj, "--output-format", "json", "buggy.py")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert [d["code"] for d in data] == ["AMP002", "AMP004"]
    d = data[1]
    assert set(d) >= {"code", "message", "filename", "location", "end_location", "fix", "url", "noqa_row"}
    assert d["location"] == {"row": 8, "column": 5}
    assert d["end_location"] == {"row": 8, "column": 21}
    assert d["fix"]["applicability"] == "safe"
    edits = d["fix"]["edits"]
    assert edits and edits[0]["content"] == "    scaler.step(optimizer)\n    scaler.update()\n"
    assert d["filename"] == str(proj / "buggy.py")  # absolute, as ruff's


def test_statistics(proj):
    r = check(proj, "--statistics", "buggy.py")
    assert r.returncode == 1
    rows = [l.split("\t") for l in r.stdout.splitlines()]
    assert ["1", "AMP002", "[*] backward-inside-autocast"] in rows
    assert ["1", "AMP004", "[*] optimizer-step-bypasses-scaler"] in rows


def test_select_ignore_exit_zero(proj):
    assert check(proj, "--select", "AMP004", "--output-format", "concise", "buggy.py").stdout.count("AMP0") == 1
    assert check(proj, "--ignore", "AMP002,AMP004", "buggy.py").returncode == 0
    assert check(proj, "--select", "AMP00", "--ignore", "AMP002", "--output-format", "json", "buggy.py").stdout.count('"AMP004"') == 1
    r = check(proj, "--exit-zero", "buggy.py")
    assert r.returncode == 0 and "Found 1 error and 1 warning." in r.stdout


def test_unknown_code_is_usage_error(proj):
    r = check(proj, "--select", "AMP999", "buggy.py")
    assert r.returncode == 2
    assert "unknown rule selector `AMP999`" in r.stderr


def test_no_cache_without_cache_dir_and_cache_created(proj):
    r = run_amplint("check", "--no-cache", "buggy.py", cwd=proj)
    assert r.returncode == 1 and not (proj / ".amplint_cache").exists()
    r = run_amplint("check", "buggy.py", cwd=proj)
    assert r.returncode == 1 and (proj / ".amplint_cache").is_dir()


def _config(proj, body):
    (proj / "pyproject.toml").write_text("[tool.amplint]\n" + textwrap.dedent(body))


def test_config_select_and_per_file_ignores(proj):
    _config(proj, 'select = ["AMP004"]\n')
    r = check(proj, "--output-format", "concise", "buggy.py")
    assert "AMP004" in r.stdout and "AMP002" not in r.stdout
    _config(proj, '[tool.amplint.per-file-ignores]\n"buggy.py" = ["AMP00"]\n')
    assert check(proj, "buggy.py").returncode == 0
    _config(proj, '[tool.amplint.per-file-ignores]\n"other_*.py" = ["AMP00"]\n')
    assert check(proj, "buggy.py").returncode == 1


def test_config_is_found_from_a_subdirectory(proj):
    sub = proj / "pkg" / "deep"
    sub.mkdir(parents=True)
    (sub / "buggy.py").write_text(BUGGY)
    _config(proj, 'ignore = ["AMP002"]\n')
    r = run_amplint("check", "--no-cache", "--output-format", "concise", "buggy.py", cwd=sub)
    assert "AMP004" in r.stdout and "AMP002" not in r.stdout


@pytest.mark.parametrize(
    "body,msg",
    [
        ('selectt = ["AMP001"]\n', "unknown key in [tool.amplint]: `selectt`"),
        ('select = ["AMP777"]\n', "unknown rule selector `AMP777`"),
        ('select = "AMP001"\nignore = 3\n', "`ignore` must be a list of strings"),
        ('[tool.amplint.per-file-ignores]\n"x.py" = ["NOPE1"]\n', "unknown rule selector `NOPE1`"),
        ('target-torch-version = "two"\n', "target-torch-version"),
    ],
)
def test_bad_config_is_exit_2(proj, body, msg):
    _config(proj, body)
    r = check(proj, "buggy.py")
    assert r.returncode == 2
    assert msg in r.stderr


def test_exclude_and_extend_exclude_and_gitignore(proj):
    gen = proj / "generated"
    gen.mkdir()
    (gen / "g.py").write_text(BUGGY)
    vendored = proj / "third_party"
    vendored.mkdir()
    (vendored / "v.py").write_text(BUGGY)
    (proj / "ignored_by_git.py").write_text(BUGGY)
    (proj / ".gitignore").write_text("ignored_by_git.py\n")
    (proj / "buggy.py").unlink()
    _config(proj, 'extend-exclude = ["generated/"]\nexclude = ["third_party"]\n')
    r = check(proj, "--show-files", ".")
    files = sorted(os.path.basename(l) for l in r.stdout.split())
    assert files == ["clean.py"]
    # an explicitly given file is checked even when excluded, unless --force-exclude
    assert check(proj, "generated/g.py").returncode == 1
    assert check(proj, "--force-exclude", "generated/g.py").returncode == 0


@pytest.mark.parametrize(
    "suffix,suppressed",
    [
        ("  # noqa", True),
        ("  # noqa: AMP004", True),
        ("  # noqa: AMP001, AMP004", True),
        ("  # NOQA:AMP004", True),
        ("  # noqa: AMP001", False),
    ],
)
def test_noqa(proj, suffix, suppressed):
    src = BUGGY.replace("    optimizer.step()\n", f"    optimizer.step(){suffix}\n")
    (proj / "buggy.py").write_text(src)
    r = check(proj, "--select", "AMP004", "buggy.py")
    assert r.returncode == (0 if suppressed else 1)


def test_noqa_on_first_line_of_multiline_statement(proj):
    src = textwrap.dedent(
        """\
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(  # noqa: AMP001
                optimizer,
            )
        """
    )
    (proj / "m.py").write_text(src)
    assert check(proj, "m.py").returncode == 0
    (proj / "m.py").write_text(src.replace("  # noqa: AMP001", ""))
    assert check(proj, "m.py").returncode == 1


def test_missing_path_is_reported_and_others_checked(proj):
    r = check(proj, "--output-format", "concise", "nope.py", "buggy.py")
    assert r.returncode == 1
    assert "nope.py:1:1: E902 No such file or directory" in r.stdout
    assert "AMP004" in r.stdout


def test_rule_and_rules_commands():
    r = run_amplint("rule", "AMP001")
    assert r.returncode == 0
    assert r.stdout.startswith("# missing-scaler-update (AMP001)")
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix safety"):
        assert section in r.stdout
    r = run_amplint("rules", "--output-format", "json")
    data = json.loads(r.stdout)
    by_code = {d["code"]: d for d in data}
    assert by_code["AMP004"]["name"] == "optimizer-step-bypasses-scaler"
    assert {"code", "name", "fix_availability", "state", "explanation"} <= set(by_code["AMP001"])
    assert run_amplint("rule", "AMP999").returncode == 2


def test_python_dash_m_and_console_script_agree(proj):
    import shutil
    import subprocess
    import sys

    exe = shutil.which("amplint", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("console script not installed")
    a = subprocess.run([exe, "check", "--no-cache", "--output-format", "concise", "buggy.py"], cwd=proj, capture_output=True, text=True)
    b = check(proj, "--output-format", "concise", "buggy.py")
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout)


# ---------------------------------------------------------------------------- issue 18: second tests


# AMP003 (its fix is unsafe: it stays after `fix` without --unsafe-fixes)
TWO_SCALERS = textwrap.dedent(
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
        scaler.update()
        s2.update()
    """
)


def test_exit_zero_with_stdin(proj):
    args = ("check", "--no-cache", "--output-format", "concise")
    plain = run_amplint(*args, "-", cwd=proj, input=BUGGY)
    zero = run_amplint(*args, "--exit-zero", "-", cwd=proj, input=BUGGY)
    assert (plain.returncode, zero.returncode) == (1, 0), zero.stderr
    assert zero.stdout == plain.stdout
    assert [ln.split(" ", 2)[:2] for ln in zero.stdout.splitlines()[:2]] == [["-:7:9:", "AMP002"], ["-:8:5:", "AMP004"]]
    # --fix from stdin: the code goes to stdout; a finding that remains exits 1, 0 with --exit-zero
    fixed = run_amplint("check", "--no-cache", "--fix", "-", cwd=proj, input=TWO_SCALERS)
    fixed_zero = run_amplint("check", "--no-cache", "--fix", "--exit-zero", "-", cwd=proj, input=TWO_SCALERS)
    assert (fixed.returncode, fixed_zero.returncode) == (1, 0), fixed_zero.stderr
    assert fixed_zero.stdout == fixed.stdout == TWO_SCALERS


def test_exit_zero_on_files_every_format_and_fix(proj):
    for fmt in ("json", "sarif", "github"):
        plain = check(proj, "--output-format", fmt, "buggy.py", "clean.py")
        zero = check(proj, "--exit-zero", "--output-format", fmt, "buggy.py", "clean.py")
        assert (plain.returncode, zero.returncode) == (1, 0), fmt
        assert zero.stdout == plain.stdout and "AMP004" in zero.stdout
    # fix mode: AMP003 remains (exit 1), --exit-zero makes it 0
    (proj / "two.py").write_text(TWO_SCALERS)
    r = run_amplint("fix", "--no-cache", "--output-format", "concise", "two.py", cwd=proj)
    assert r.returncode == 1 and "AMP003" in r.stdout
    r = run_amplint("fix", "--no-cache", "--exit-zero", "--output-format", "concise", "two.py", cwd=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "two.py:4:6: AMP003" in r.stdout and "Found 1 error." in r.stdout


def test_noqa_with_a_code_keeps_other_findings_on_the_line(proj):
    """`# noqa: AMP001` on a line with an AMP004 finding hides nothing of AMP004 (JSON, all rules)."""
    src = BUGGY.replace("    optimizer.step()\n", "    optimizer.step()  # noqa: AMP001\n")
    (proj / "buggy.py").write_text(src)
    r = check(proj, "--output-format", "json", "buggy.py")
    assert r.returncode == 1
    assert [(d["code"], d["location"]["row"]) for d in json.loads(r.stdout)] == [("AMP002", 7), ("AMP004", 8)]
    (proj / "buggy.py").write_text(src.replace("# noqa: AMP001", "# noqa: AMP001, AMP004"))
    r = check(proj, "--output-format", "json", "buggy.py")
    assert [(d["code"], d["location"]["row"]) for d in json.loads(r.stdout)] == [("AMP002", 7)]


def test_cache_follows_mtime_and_size(proj):
    """An edit keeping the size (new mtime) and an edit keeping the mtime (new size) are both
    seen by a cached run (the cache's (mtime, size) shortcut must check both)."""
    f = proj / "t.py"
    f.write_text(CLEAN)
    cached = lambda: run_amplint("check", "--output-format", "concise", "t.py", cwd=proj)  # noqa: E731
    assert cached().returncode == 0
    st = f.stat()
    # same size, new content, new mtime: `scaler.update()` -> `scaler.upd_te()` is AMP102
    same_size = CLEAN.replace("scaler.update()", "scaler.upd_te()")
    assert len(same_size) == len(CLEAN)
    f.write_text(same_size)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
    r = cached()
    assert r.returncode == 1 and "AMP001" in r.stdout, r.stdout
    # new size, mtime set back to the cached one
    st = f.stat()
    f.write_text(CLEAN + "# done\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_size != st.st_size
    r = cached()
    assert r.returncode == 0, r.stdout
    # and with both unchanged the cached result is reused as is
    assert cached().stdout == r.stdout
