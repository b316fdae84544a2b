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
