"""README stays true: its rule table is `amplint rules`, its commands are the CI's."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as fh:
        return fh.read()


def test_rules_table_matches_amplint_rules():
    m = re.search(r"<!-- rules-table:start[^>]*-->\n(.*?)\n<!-- rules-table:end -->", _readme(), re.S)
    assert m, "README lost its rules table markers"
    out = subprocess.run([sys.executable, "-m", "amplint", "rules", "--output-format", "markdown"], capture_output=True, text=True)
    assert out.returncode == 0
    assert m.group(1).strip() == out.stdout.strip()


def test_ci_runs_the_readme_test_command():
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as fh:
        ci = fh.read()
    blocks = re.findall(r"```sh\n(.*?)\n```", _readme(), re.S)
    test_cmd = next(b for b in blocks if "pytest" in b)
    assert test_cmd.strip() in ci


def test_readme_stays_short_and_its_links_exist():
    text = _readme()
    assert len(text.splitlines()) <= 260  # issue 33: ~250 lines, the long material lives in docs/
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert "docs/project-mode.md" in links and "docs/verify.md" in links and "benchmarks/README.md" in links
    for link in links:
        assert os.path.exists(os.path.join(REPO, link)), link


# Every command of the README's ```sh blocks is run somewhere; a new one must say where.
RUN_BY = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/amplint check fixtures/":
        "tests/test_install.py::test_a_clean_clone_installs_with_the_readmes_words (verbatim, in a clone)",
    "pip install .": "tests/test_install.py::test_a_clean_clone_installs_with_the_readmes_words",
    "pip install '.[server]'": "tests/test_install.py::test_a_clean_clone_installs_with_the_readmes_words",
    'pip install "amplint @ git+https://github.com/amplint/amplint"':
        "tests/test_install.py::test_a_clean_clone_installs_with_the_readmes_words (the clone's URL for the project's)",
    # torch's CPU index (download.pytorch.org) is not reachable from this project's machines, and
    # the CI's test command installs '.[runtime]' over the local torch 2.13.0 every run
    "pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install '.[runtime]'":
        "not run: needs download.pytorch.org; '.[runtime]' by .ci/run's -e '.[test,runtime]'",
    'pip install "amplint[runtime] @ git+https://github.com/amplint/amplint"':
        "not run: pulls torch; the git form is run without the extra by the clean-clone test",
    "amplint server": "tests/server (a real LSP client over stdio)",
}


def _sh_commands() -> list[str]:
    out = []
    for block in re.findall(r"```sh\n(.*?)\n```", _readme(), re.S):
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            if cmd:
                out.append(cmd)
    return out


def test_every_readme_command_is_run_somewhere():
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as fh:
        ci = fh.read()
    unrun = [c for c in _sh_commands() if c not in RUN_BY and c not in ci and not c.startswith("amplint ")]
    assert not unrun, unrun
    assert [c for c in RUN_BY if c not in _sh_commands()] == []  # the map follows the README


def test_the_usage_commands_run(tmp_path):
    """The `amplint ...` lines of the README, on a copy of its runtime example (readme_train.py,
    which trains through `train`) as train.py and src/train.py."""
    import shutil

    script = os.path.join(REPO, "tests", "runtime", "user_scripts", "readme_train.py")
    (tmp_path / "src").mkdir()
    shutil.copy(script, tmp_path / "train.py")
    shutil.copy(script, tmp_path / "src" / "train.py")
    try:
        import torch  # noqa: F401
        has_torch = True
    except ImportError:
        has_torch = False
    ran = 0
    for cmd in _sh_commands():
        if not cmd.startswith("amplint ") or cmd in RUN_BY:
            continue
        args = cmd.replace("...", "--epochs 1").split()[1:]
        if args[0] in ("verify", "trace") and not has_torch:
            continue
        if args[0] == "verify":
            args += ["--device", "cpu"]
        e = dict(os.environ, AMPLINT_CACHE_DIR=str(tmp_path / ".cache"))
        e.pop("AMPLINT_OUTPUT_FORMAT", None)
        r = subprocess.run([sys.executable, "-m", "amplint", *args], cwd=tmp_path, capture_output=True, text=True,
                           env=e, timeout=300, stdin=subprocess.DEVNULL)
        assert r.returncode in (0, 1), (cmd, r.returncode, r.stdout[-1500:], r.stderr[-1500:])
        assert "Traceback" not in r.stderr and "error:" not in r.stderr, (cmd, r.stderr[-1500:])
        ran += 1
    assert ran >= 10
