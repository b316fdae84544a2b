"""What editors and CI wrappers rely on: `amplint check -` with --stdin-filename,
--force-exclude for explicitly passed files, --add-noqa, and an empty path list."""
import textwrap

import pytest

from integ_util import FIXED, MISUSE, run_amplint

CLEAN = "import torch\nx = torch.ones(2)\n"
TWO_SCALERS = """import torch
scaler1 = torch.amp.GradScaler("cuda")
scaler2 = torch.amp.GradScaler("cuda")
for x in loader:
    scaler1.scale(loss1).backward()
    scaler2.scale(loss2).backward()
    scaler1.step(optimizer)
    scaler2.step(optimizer)
    scaler1.update()
    scaler2.update()
"""


# ------------------------------------------------------------------------------- stdin

def test_stdin_check_reports_under_the_stdin_filename(tmp_path):
    p = run_amplint("check", "--output-format", "concise", "--stdin-filename", "src/train.py", "-", cwd=tmp_path, input=MISUSE)
    assert p.returncode == 1
    assert p.stdout.startswith("src/train.py:8:5: AMP001 [*]")
    p = run_amplint("check", "--output-format", "concise", "-", cwd=tmp_path, input=MISUSE)
    assert p.stdout.startswith("-:8:5: AMP001")


def test_stdin_clean_and_syntax_error(tmp_path):
    p = run_amplint("check", "-", cwd=tmp_path, input=CLEAN)
    assert p.returncode == 0 and "All checks passed!" in p.stdout
    p = run_amplint("check", "--output-format", "concise", "--stdin-filename", "a.py", "-", cwd=tmp_path, input="def (\n")
    assert p.returncode == 1 and p.stdout.startswith("a.py:1:5: E999")


def test_stdin_fix_writes_the_fixed_source_to_stdout(tmp_path):
    p = run_amplint("check", "--fix", "--stdin-filename", "train.py", "-", cwd=tmp_path, input=MISUSE)
    assert p.returncode == 0, p.stderr
    assert p.stdout == FIXED
    # nothing to fix: the input comes back unchanged
    p = run_amplint("fix", "-", cwd=tmp_path, input=CLEAN)
    assert p.returncode == 0 and p.stdout == CLEAN
    # only an unsafe fix exists: without --unsafe-fixes the finding remains (exit 1), the
    # source comes back unchanged; with it, the file is fixed (exit 0)
    p = run_amplint("fix", "--stdin-filename", "t.py", "-", cwd=tmp_path, input=TWO_SCALERS)
    assert (p.returncode, p.stdout) == (1, TWO_SCALERS)
    p = run_amplint("fix", "--unsafe-fixes", "--stdin-filename", "t.py", "-", cwd=tmp_path, input=TWO_SCALERS)
    assert p.returncode == 0 and "scaler2" not in p.stdout
    p = run_amplint("fix", "--exit-zero", "-", cwd=tmp_path, input=TWO_SCALERS)
    assert p.returncode == 0


def test_stdin_respects_config_found_from_the_stdin_filename(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.amplint]\nignore = ["AMP001"]\n')
    (tmp_path / "src").mkdir()
    p = run_amplint("check", "--stdin-filename", str(tmp_path / "src" / "train.py"), "-", cwd="/", input=MISUSE)
    assert p.returncode == 0, p.stdout


# ----------------------------------------------------------------------- force-exclude

@pytest.fixture
def excluded_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.amplint]\nextend-exclude = ["generated/"]\n')
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "train.py").write_text(MISUSE)
    (tmp_path / "train.py").write_text(MISUSE)
    return tmp_path


def test_explicit_paths_are_checked_unless_force_exclude(excluded_project):
    p = run_amplint("check", "--no-cache", "--output-format", "concise", "generated/train.py", cwd=excluded_project)
    assert p.returncode == 1 and "generated/train.py:8:5: AMP001" in p.stdout
    p = run_amplint("check", "--no-cache", "--force-exclude", "--output-format", "concise", "generated/train.py", "train.py", cwd=excluded_project)
    assert p.returncode == 1
    assert "generated/" not in p.stdout and p.stdout.startswith("train.py:8:5: AMP001")
    # only excluded files passed (what pre-commit does): nothing checked, exit 0
    p = run_amplint("check", "--no-cache", "--force-exclude", "generated/train.py", cwd=excluded_project)
    assert p.returncode == 0
    # directory walks always honour excludes
    p = run_amplint("check", "--show-files", ".", cwd=excluded_project)
    assert "generated" not in p.stdout and "train.py" in p.stdout


def test_force_exclude_from_config(excluded_project):
    (excluded_project / "pyproject.toml").write_text('[tool.amplint]\nextend-exclude = ["generated/"]\nforce-exclude = true\n')
    p = run_amplint("check", "--no-cache", "generated/train.py", cwd=excluded_project)
    assert p.returncode == 0


def test_force_exclude_with_stdin(excluded_project):
    args = ("--force-exclude", "--stdin-filename", "generated/train.py", "-")
    p = run_amplint("check", *args, cwd=excluded_project, input=MISUSE)
    assert p.returncode == 0 and "AMP001" not in p.stdout
    p = run_amplint("check", "--fix", *args, cwd=excluded_project, input=MISUSE)
    assert p.returncode == 0 and p.stdout == MISUSE  # an excluded file is echoed untouched
    p = run_amplint("check", "--stdin-filename", "generated/train.py", "-", cwd=excluded_project, input=MISUSE)
    assert p.returncode == 1


def test_no_paths_and_no_files(tmp_path):
    """`amplint check` with no paths checks "."; a tree with no Python files passes (no crash)."""
    p = run_amplint("check", "--no-cache", "--force-exclude", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "All checks passed!" in p.stdout
    p = run_amplint("fix", "--no-cache", "--force-exclude", cwd=tmp_path)
    assert p.returncode == 0, p.stderr


# ---------------------------------------------------------------------------- add-noqa

def _add_noqa(tmp_path, source):
    f = tmp_path / "t.py"
    f.write_text(source)
    p = run_amplint("check", "--no-cache", "--add-noqa", "t.py", cwd=tmp_path)
    return p, f.read_text()


def test_add_noqa_appends_the_codes(tmp_path):
    p, text = _add_noqa(tmp_path, MISUSE)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Added 1 noqa directive." in p.stderr
    assert text == MISUSE.replace("    scaler.step(optimizer)\n", "    scaler.step(optimizer)  # noqa: AMP001\n")
    assert run_amplint("check", "--no-cache", "t.py", cwd=tmp_path).returncode == 0


def test_add_noqa_is_idempotent(tmp_path):
    _, once = _add_noqa(tmp_path, MISUSE)
    p, twice = _add_noqa(tmp_path, once)
    assert twice == once
    assert "Added 0 noqa directives." in p.stderr


def test_add_noqa_merges_with_existing_codes(tmp_path):
    src = MISUSE.replace("    scaler.step(optimizer)\n", "    scaler.step(optimizer)  # noqa: E501, B950\n")
    _, text = _add_noqa(tmp_path, src)
    assert "    scaler.step(optimizer)  # noqa: AMP001, B950, E501\n" in text
    # a blanket noqa already suppresses everything: left alone
    src = MISUSE.replace("    scaler.step(optimizer)\n", "    scaler.step(optimizer)  # noqa\n")
    _, text = _add_noqa(tmp_path, src)
    assert text == src


def test_add_noqa_puts_it_on_the_first_line_of_a_multiline_statement(tmp_path):
    src = MISUSE.replace(
        "    scaler.step(optimizer)\n", "    stats = log_step(\n        scaler.step(optimizer),\n        x,\n    )\n"
    )
    p, text = _add_noqa(tmp_path, src)
    assert "    stats = log_step(  # noqa: AMP001\n        scaler.step(optimizer),\n" in text
    assert run_amplint("check", "--no-cache", "t.py", cwd=tmp_path).returncode == 0


def test_add_noqa_never_breaks_strings_or_continuations(tmp_path):
    src = MISUSE.replace(
        "    scaler.step(optimizer)\n",
        textwrap.indent('stats = log_step("""\n    header""", scaler.step(optimizer))\n', "    "),
    )
    _, text = _add_noqa(tmp_path, src)
    assert '    header""", scaler.step(optimizer))  # noqa: AMP001\n' in text
    assert 'log_step("""\n' in text
    src = MISUSE.replace("    scaler.step(optimizer)\n", "    total = 1 + \\\n        scaler.step(optimizer)\n")
    _, text = _add_noqa(tmp_path, src)
    assert "    total = 1 + \\\n        scaler.step(optimizer)  # noqa: AMP001\n" in text
    compile(text, "t.py", "exec")
    assert run_amplint("check", "--no-cache", "t.py", cwd=tmp_path).returncode == 0
