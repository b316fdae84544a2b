"""Start-up (issue 13, item 12): `amplint check`/`fix` with plain options is parsed without
click, into exactly the parameters click would pass; everything else goes to click. Speed
itself is measured by benchmarks/startup.py, never asserted here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from amplint import cli
from amplint_testutil import run_amplint

CHECK_ARGS = [
    [],
    ["."],
    ["a.py", "b.py"],
    ["-"],
    ["--fix", "a.py"],
    ["--no-fix", "a.py"],
    ["a.py", "--fix", "--unsafe-fixes"],
    ["--diff", "--exit-zero", "--exit-non-zero-on-fix", "--statistics", "src"],
    ["--output-format", "json", "a.py"],
    ["--output-format=concise", "a.py"],
    ["-o", "report.txt", "a.py"],
    ["--output-file=report.txt", "a.py"],
    ["--select", "AMP0,AMP101", "--extend-select", "AMP203", "--ignore", "AMP002", "."],
    ["--select=ALL", "--preview", "."],
    ["--no-preview", "--preview", "."],
    ["--preview", "--no-preview", "."],
    ["--target-torch-version", "2.1", "."],
    ["--no-cache", "--cache-dir", "cachedir", "."],
    ["--config", "pyproject.toml", "--isolated", "--force-exclude", "."],
    ["--stdin-filename", "x.py", "-"],
    ["--add-noqa", "--show-files", "-q", "."],
    ["--quiet", "."],
    ["-j", "2", "."],
    ["--jobs", "1", "."],
    ["--jobs=16", "."],
    ["--per-file-timeout", "0", "."],
    ["--per-file-timeout", "2.5", "."],
    ["--per-file-timeout=.5", "."],
    ["--select", "AMP004", "--select", "AMP001", "."],  # the last one wins
    ["--", "--weird-name.py", "-x.py"],
    ["a.py", "--", "--fix"],
]
FIX_ARGS = [a for a in CHECK_ARGS if "--fix" not in a and "--no-fix" not in a]
CLICK_DECIDES = [
    ["--help"],
    ["-h"],
    ["a.py", "--help"],
    ["--output-format", "xml", "a.py"],
    ["--output-format"],
    ["-j", "0", "."],
    ["-j", "-1", "."],
    ["-j", "two", "."],
    ["-j2", "."],
    ["-qj", "2", "."],
    ["--per-file-timeout", "-1", "."],
    ["--per-file-timeout", "1e3", "."],
    ["--bogus", "."],
    ["--fix=yes", "."],
    ["--select", "--fix", "."],
    ["--select=", "."],
    ["-o", "adir", "a.py"],
    ["--config", "adir", "."],
    ["--cache-dir", "afile", "."],
]


def _click_params(command: str, args: list[str]) -> dict:
    from amplint.clickapp import check_command, fix_command

    cmd = check_command if command == "check" else fix_command
    return cmd.make_context(command, list(args)).params


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AMPLINT_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("AMPLINT_CACHE_DIR", raising=False)
    return tmp_path


@pytest.mark.parametrize("args", CHECK_ARGS, ids=" ".join)
def test_check_fast_parse_matches_click(cwd, args):
    assert cli.fast_parse("check", args) == _click_params("check", args)


@pytest.mark.parametrize("args", FIX_ARGS, ids=" ".join)
def test_fix_fast_parse_matches_click(cwd, args):
    fast = cli.fast_parse("fix", args)
    slow = _click_params("fix", args)
    assert fast is not None
    assert {**fast, "fix": None} == {**slow, "fix": None}


@pytest.mark.parametrize("args", CLICK_DECIDES, ids=" ".join)
def test_anything_unusual_goes_to_click(cwd, args):
    assert cli.fast_parse("check", args) is None


def test_fix_with_fix_flags_goes_to_click(cwd):
    assert cli.fast_parse("fix", ["--no-fix", "."]) is None
    assert cli.fast_parse("fix", ["--fix", "."]) is None


@pytest.mark.parametrize(
    "env",
    [
        {"AMPLINT_OUTPUT_FORMAT": "json"},
        {"AMPLINT_OUTPUT_FORMAT": ""},
        {"AMPLINT_CACHE_DIR": "somewhere"},
        {"AMPLINT_CACHE_DIR": ""},
    ],
)
@pytest.mark.parametrize("args", [["."], ["--output-format", "concise", "--cache-dir", "c", "."]])
def test_environment_variables_as_click_reads_them(cwd, monkeypatch, env, args):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cli.fast_parse("check", args) == _click_params("check", args)


def test_bad_environment_value_goes_to_click(cwd, monkeypatch):
    monkeypatch.setenv("AMPLINT_OUTPUT_FORMAT", "xml")
    assert cli.fast_parse("check", ["."]) is None
    r = run_amplint("check", ".", cwd=cwd, env={"AMPLINT_OUTPUT_FORMAT": "xml"})
    assert r.returncode == 2 and "Invalid value for '--output-format'" in r.stderr


def test_every_click_parameter_has_a_fast_default():
    from amplint.clickapp import check_command, fix_command

    assert {p.name for p in check_command.params} == set(cli.DEFAULTS)
    assert {p.name for p in fix_command.params} == set(cli.DEFAULTS) - {"fix"}


BAD = textwrap.dedent(
    """\
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.autocast("cuda"):
            loss = model(x)
        scaler.scale(loss).backward()
        optimizer.step()
    """
)


def _modules_after(args: list[str], cwd) -> set[str]:
    probe = textwrap.dedent(
        f"""
        import atexit, sys
        atexit.register(lambda: sys.stderr.write("MODULES=" + ",".join(sorted(sys.modules)) + "\\n"))
        from amplint.cli import main
        main({args!r})
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPLINT_")}
    p = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("MODULES="))
    return set(line[len("MODULES="):].split(","))


def test_one_file_check_and_version_do_not_import_click(tmp_path):
    (tmp_path / "one.py").write_text(BAD)
    for args in (["check", "--no-cache", "one.py"], ["check", "one.py"], ["--version"], ["fix", "--diff", "one.py"]):
        mods = _modules_after(args, tmp_path)
        assert "click" not in mods, args
    assert "click" in _modules_after(["check", "--help"], tmp_path)


def test_warm_cache_run_does_not_load_the_analysis(tmp_path):
    (tmp_path / "one.py").write_text(BAD)
    cold = _modules_after(["check", "one.py"], tmp_path)
    assert "amplint.analyze" in cold and "amplint.parse" in cold
    warm = _modules_after(["check", "one.py"], tmp_path)
    assert "amplint.analyze" not in warm and "amplint.parse" not in warm
    assert "hashlib" not in warm and "tempfile" not in warm


def test_one_file_analysis_imports_neither_signal_nor_fnmatch(tmp_path):
    """The file is analysed under its time budget (the alarm handler is set through the C
    module _signal) and selected without per-file-ignores: signal.py (its enums) and fnmatch
    are not imported; with per-file-ignores fnmatch is, and the pattern applies."""
    (tmp_path / "one.py").write_text(BAD)
    bare = subprocess.run([sys.executable, "-c", "import sys; print(','.join(sys.modules))"], capture_output=True,
                          text=True, timeout=120).stdout.strip().split(",")  # an editable install's finder: fnmatch
    mods = _modules_after(["check", "--no-cache", "one.py"], tmp_path) - set(bare)
    assert "amplint.analyze" in mods and "amplint.rules.amp004_optimizer_step_bypasses_scaler" in mods
    assert "signal" not in mods and "fnmatch" not in mods
    (tmp_path / "pyproject.toml").write_text('[tool.amplint.per-file-ignores]\n"one.py" = ["AMP004"]\n')
    assert "fnmatch" in _modules_after(["check", "--no-cache", "one.py"], tmp_path)
    r = run_amplint("check", "--no-cache", "one.py", cwd=tmp_path)
    assert r.returncode == 0 and "AMP004" not in r.stdout


def test_fast_and_click_paths_print_the_same(tmp_path):
    """The same command line through the fast path and through click prints the same."""
    (tmp_path / "one.py").write_text(BAD)
    fast = run_amplint("check", "--no-cache", "--output-format", "concise", "one.py", cwd=tmp_path)
    probe = "import sys; from amplint.clickapp import cli; cli.main(args=sys.argv[1:], prog_name='amplint')"
    slow = subprocess.run([sys.executable, "-c", probe, "check", "--no-cache", "--output-format", "concise", "one.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert fast.returncode == 1 and "one.py:7:5: AMP004" in fast.stdout


def test_help_still_comes_from_click():
    r = run_amplint("check", "--help")
    assert r.returncode == 0 and r.stdout.startswith("Usage: amplint check [OPTIONS] [PATHS]...")
    r = run_amplint("check", "x.py", "-h")
    assert r.returncode == 0 and "--output-format" in r.stdout
    r = run_amplint("check", "--bogus")
    assert r.returncode == 2 and "No such option" in r.stderr


def test_version_fast_and_slow_agree():
    from amplint import __version__

    for args in (["--version"], ["-V"]):
        r = run_amplint(*args)
        assert (r.returncode, r.stdout) == (0, f"amplint {__version__}\n")
    probe = "import sys; from amplint.clickapp import cli; cli.main(args=['--version'], prog_name='amplint')"
    slow = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert (slow.returncode, slow.stdout) == (0, f"amplint {__version__}\n")


def test_top_level_help_loads_no_lazy_command(tmp_path):
    mods = _modules_after(["--help"], tmp_path)
    assert "click" in mods and "amplint.runtime.commands" not in mods


def test_fast_spec_decides_negation_free_matches_as_pathspec_does():
    """Walking into an excluded directory (.amplint_cache, .git, .venv) must not import
    pathspec just to confirm the match (project mode walks the whole tree for one file)."""
    import pathspec

    from amplint.discover import _FastSpec

    sys.path.insert(0, os.path.dirname(__file__))
    from test_speed_infra import PATHS, PATTERNS

    positive = [p for p in PATTERNS if not p.startswith("!")]
    for n in range(1, len(positive) + 1):
        lines = positive[:n]
        ref = pathspec.GitIgnoreSpec.from_lines(lines)
        fast = _FastSpec(lines)
        for path in PATHS + [".amplint_cache/", ".git/", "a/.venv/", "x/__pycache__/"]:
            name = path.rstrip("/").rsplit("/", 1)[-1]
            parent = path.rstrip("/").rsplit("/", 1)[0] + "/" if "/" in path.rstrip("/") else ""
            assert fast.match(path) == ref.match_file(path), (lines, path)
            assert fast.match(path, name, path.endswith("/"), fast.ancestors_hit(parent)) == ref.match_file(path), (lines, path)


def test_one_file_check_beside_the_cache_does_not_import_pathspec(tmp_path):
    (tmp_path / "one.py").write_text(BAD)
    (tmp_path / ".venv").mkdir()
    run_amplint("check", "one.py", cwd=tmp_path)  # creates .amplint_cache with its .gitignore
    assert (tmp_path / ".amplint_cache").is_dir()
    for args in (["check", "one.py"], ["check", "--no-cache", "one.py"]):
        assert "pathspec" not in _modules_after(args, tmp_path), args


# the GitHub Python template's kinds of lines: comments, blank lines, globs, classes, anchored paths
PY_GITIGNORE = """# Byte-compiled / optimized / DLL files
__pycache__/
*.py[cod]
*$py.class

# Distribution / packaging
build/
share/python-wheels/
*.egg-info/
.coverage.*
*.py,cover
docs/_build/
/site
.idea/*
**/.ipynb_checkpoints/
wandb/**
.env
#.idea/
!keep.egg-info/
"""


def test_one_file_check_in_a_project_with_a_common_gitignore_does_not_import_pathspec(tmp_path):
    """Inside a project, a one-file check walks the project (project mode), reading its
    .gitignore: lines of the common forms are translated without pathspec, which costs a
    pre-commit call 20-30 ms to import; a path that the patterns match is still decided by it."""
    (tmp_path / ".gitignore").write_text(PY_GITIGNORE)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "src" / "util.py").write_text("def f():\n    return 1\n")
    for args in (["check", "--no-cache", "src/train.py"], ["check", "--no-cache", "."]):
        assert "pathspec" not in _modules_after(args, tmp_path), args
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text(BAD)
    (tmp_path / "x.egg-info").mkdir()  # matched by a line that a `!` line names: pathspec decides
    p = run_amplint("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert "src/train.py" in p.stdout and "build/gen.py" not in p.stdout
