"""Where amplint lives and how to install it: the one place that names the project's URL.

Every rule link (SARIF ``helpUri``/``informationUri``, JSON ``url``, the LSP's
``codeDescription``, ``amplint rule``) and every install hint the CLI prints is built from
``PROJECT_URL``; ``pyproject.toml``'s ``[project.urls]`` must agree (tests/test_install.py).
No imports: the check path loads this module.
"""

PROJECT_URL = "https://github.com/amplint/amplint"
DOCS_URL = PROJECT_URL + "/blob/main/docs"
RULE_DOCS_URL = DOCS_URL + "/rules.md#{code_lower}-{name}"
ISSUES_URL = PROJECT_URL + "/issues"

# torch's CPU wheels: without the index, `pip install torch` on Linux pulls the CUDA build
# (several GB). The machines of this project's CI have a local CPU build: torch==2.13.0.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CPU_INSTALL = f"pip install torch --index-url {TORCH_CPU_INDEX}"


def install_hint(extra: str | None = None) -> str:
    """How to install amplint (with ``extra``) where it is not published: from a clone, or from git."""
    local = f"'.[{extra}]'" if extra else "."
    name = f"amplint[{extra}]" if extra else "amplint"
    return f"pip install {local} in a clone of amplint, or pip install \"{name} @ git+{PROJECT_URL}\""


def torch_hint() -> str:
    """torch first (its CPU build: a GPU machine wants the CUDA index of pytorch.org instead), then the extra."""
    return f"{TORCH_CPU_INSTALL} (the CPU build), then {install_hint('runtime')}"
