"""Install instructions that work where amplint is not published (issue 33): one project URL
(amplint/meta.py) behind every rule link and install hint, agreeing with pyproject.toml."""

import json
import os
import re
import sys

import pytest

from amplint import meta
from amplint_testutil import REPO, run_amplint

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _pyproject() -> dict:
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)


def test_pyproject_urls_are_the_one_project_url():
    urls = _pyproject()["project"]["urls"]
    assert urls == {"Homepage": meta.PROJECT_URL, "Documentation": meta.DOCS_URL, "Issues": meta.ISSUES_URL}
    assert meta.DOCS_URL.startswith(meta.PROJECT_URL + "/") and meta.ISSUES_URL.startswith(meta.PROJECT_URL + "/")


def test_every_rule_link_is_built_from_the_project_url(tmp_path):
    from amplint.rules import ALL_RULES

    for rule in ALL_RULES.values():
        assert rule.url == f"{meta.DOCS_URL}/rules.md#{rule.code.lower()}-{rule.name}"
    (tmp_path / "a.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    sarif = json.loads(run_amplint("check", "--no-cache", "--output-format", "sarif", "a.py", cwd=tmp_path).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == meta.PROJECT_URL
    assert {r["helpUri"] for r in driver["rules"]} == {ALL_RULES[r["id"]].url for r in driver["rules"]}
    found = json.loads(run_amplint("check", "--no-cache", "--output-format", "json", "a.py", cwd=tmp_path).stdout)
    assert found and all(f["url"] == ALL_RULES[f["code"]].url for f in found)
    page = run_amplint("rule", "AMP101").stdout
    assert page.rstrip().splitlines()[-1] == f"Documentation: {ALL_RULES['AMP101'].url}"


def test_install_hint_gives_the_clone_and_git_forms():
    assert meta.install_hint() == f'pip install . in a clone of amplint, or pip install "amplint @ git+{meta.PROJECT_URL}"'
    assert meta.install_hint("server") == (
        f"pip install '.[server]' in a clone of amplint, or pip install \"amplint[server] @ git+{meta.PROJECT_URL}\"")
    assert meta.torch_hint().startswith("pip install torch --index-url https://download.pytorch.org/whl/cpu ")


_UNPUBLISHED = re.compile(r"""pip install (-[-\w]+ )*['"]?amplint(\[\w+\])?['"]?(?! @ git\+)(\s|$|`|\))""")


@pytest.mark.parametrize("where", ["README.md", "docs", "amplint", "benchmarks", ".pre-commit-hooks.yaml"])
def test_no_instruction_installs_amplint_from_an_index(where):
    """`pip install amplint` fails: the package is not published. Only `.`/`.[extra]` or git forms."""
    root = os.path.join(REPO, where)
    paths = [root] if os.path.isfile(root) else [
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith((".py", ".md", ".sh", ".yaml"))]
    bad = []
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if _UNPUBLISHED.search(line):
                    bad.append(f"{os.path.relpath(p, REPO)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)
    assert _UNPUBLISHED.search("pip install 'amplint[runtime]'") and _UNPUBLISHED.search("run: pip install amplint")
    assert not _UNPUBLISHED.search(f'pip install "amplint[runtime] @ git+{meta.PROJECT_URL}"')


def test_unpinned_torch_lines_name_the_cpu_index():
    """An ordinary machine gets the CPU build only when the index is named."""
    bad = []
    for p in [os.path.join(REPO, "README.md")] + [os.path.join(REPO, "docs", f) for f in os.listdir(os.path.join(REPO, "docs"))]:
        with open(p, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                for m in re.finditer(r"pip install (-\w+ )*torch(?![=\w])(.*)", line):
                    if "--index-url https://download.pytorch.org/whl/" not in m.group(2):
                        bad.append(f"{os.path.relpath(p, REPO)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_the_version_has_one_source():
    """`amplint --version`, the package metadata, SARIF and the cache all read amplint.__version__."""
    import amplint

    assert re.fullmatch(r"\d+\.\d+\.\d+", amplint.__version__)
    assert _pyproject()["project"]["dynamic"] == ["version"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "amplint.__version__"}
    assert run_amplint("--version").stdout == f"amplint {amplint.__version__}\n"
    assert run_amplint("-V").stdout == f"amplint {amplint.__version__}\n"
    spelled = []
    for d, _, fs in os.walk(os.path.join(REPO, "amplint")):
        for f in fs:
            if f.endswith(".py") and f != "__init__.py" or d != os.path.join(REPO, "amplint") and f == "__init__.py":
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    if re.search(r"""["']%s["']""" % re.escape(amplint.__version__), fh.read()):
                        spelled.append(os.path.join(d, f))
    assert not spelled  # nobody spells the version out a second time


def test_the_pre_commit_rev_convention_is_documented():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    snippet = re.search(r"```yaml\n# \.pre-commit-config\.yaml\n(.*?)```", readme, re.S).group(1)
    rev = re.search(r"rev: (\S+)", snippet).group(1)
    assert rev == "<commit"  # no tag exists yet: the snippet pins a commit
    assert f"repo: {meta.PROJECT_URL}" in snippet
    assert "tagged `v` + the version that\n`amplint --version` prints" in readme


# --------------------------------------------------------------------------- a clean clone
# The README's own words, run in a fresh clone of this repository and fresh venvs (issue 33).
# It needs the package index pip is configured with (libcst, click, pathspec, setuptools,
# pygls); offline, deselect it with `-m "not install"` or set AMPLINT_SKIP_INSTALL_TEST=1.

import shutil
import subprocess

README_QUICK_START = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/amplint check fixtures/"
FIXTURE = "fixtures/amp004_optimizer_step_bypasses_scaler/before.py"


def _sh(cmd: str, cwd, env, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.install
@pytest.mark.skipif(os.environ.get("AMPLINT_SKIP_INSTALL_TEST") == "1", reason="AMPLINT_SKIP_INSTALL_TEST=1")
@pytest.mark.skipif(not os.path.exists(os.path.join(REPO, ".git")) or shutil.which("git") is None,
                    reason="needs git and a git checkout to clone")
def test_a_clean_clone_installs_with_the_readmes_words(tmp_path):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert README_QUICK_START in readme
    for line in ("pip install .", "pip install '.[server]'", f'pip install "amplint @ git+{meta.PROJECT_URL}"'):
        assert line in readme, line
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "AMPLINT_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix))
    clone = tmp_path / "amplint"
    subprocess.run(["git", "clone", "-q", REPO, str(clone)], check=True, capture_output=True, timeout=120)

    # Quick start, verbatim: an editable install in the clone, then the bundled fixtures (exit 1).
    r = _sh(README_QUICK_START, clone, env)
    assert r.returncode == 1 and "AMP001" in r.stdout and "Found " in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]

    # Install: `pip install .` into a fresh venv, no torch anywhere.
    venv = tmp_path / "venv"
    assert _sh(f"python3 -m venv {venv}", clone, env).returncode == 0
    pip, amplint = venv / "bin" / "pip", venv / "bin" / "amplint"
    r = _sh(f"{pip} install -q .", clone, env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _sh(f"{venv}/bin/python -c 'import torch'", tmp_path, env).returncode != 0  # the linter needs no torch
    r = _sh(f"{amplint} --version", tmp_path, env)
    assert (r.returncode, r.stdout) == (0, f"amplint {_pyproject_version()}\n")
    r = _sh(f"{amplint} check --no-cache {FIXTURE}", clone, env)
    assert r.returncode == 1 and "AMP004" in r.stdout, r.stdout + r.stderr
    r = _sh(f"{amplint} verify {FIXTURE}", clone, env)  # without torch: the hint, exit 2
    assert r.returncode == 2 and meta.TORCH_CPU_INSTALL in r.stderr and "pip install '.[runtime]'" in r.stderr
    r = _sh(f"{amplint} server < /dev/null", clone, env)  # without the extra: the hint, exit 2
    assert r.returncode == 2 and "pip install '.[server]'" in r.stderr, r.stderr
    r = _sh(f"{pip} install -q '.[server]'", clone, env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _sh(f"{amplint} server --help", clone, env)
    assert r.returncode == 0 and "--debounce" in r.stdout, r.stdout + r.stderr

    # From git: the README's form with this clone's URL in place of the project's.
    venv2 = tmp_path / "venv2"
    assert _sh(f"python3 -m venv {venv2}", tmp_path, env).returncode == 0
    r = _sh(f'{venv2}/bin/pip install -q "amplint @ git+file://localhost{clone}"', tmp_path, env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _sh(f"{venv2}/bin/amplint check --no-cache {clone / FIXTURE}", tmp_path, env)
    assert r.returncode == 1 and "AMP004" in r.stdout, r.stdout + r.stderr


def _pyproject_version() -> str:
    import amplint

    return amplint.__version__
