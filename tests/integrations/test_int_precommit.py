"""The shipped .pre-commit-hooks.yaml, run for real by pre-commit in a throw-away git repo.

pre-commit clones a git repo holding this checkout's working tree (so uncommitted changes
are what is tested), pip-installs it into its own virtualenv, and runs the hooks. pre-commit
is installed by the `test` extra, so it is imported, not skipped; the test skips only when
`git` is not installed. A hook environment that cannot be built fails the test: "No matching
distribution" is also what a packaging regression (a bad dependency pin) prints.
"""
import os
import shutil
import subprocess
import sys

import pytest

from integ_util import FIXED, MISUSE, REPO

import pre_commit  # noqa: F401  (the `test` extra installs it: a broken install fails here)

if shutil.which("git") is None:
    pytest.skip("git is not installed", allow_module_level=True)

EVIDENCE = os.environ.get("AMPLINT_EVIDENCE_DIR")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "amplint-test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "amplint-test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd, *args, env):
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)


def _hook_repo(tmp_path, env) -> tuple[str, str]:
    """A git repo with this checkout's package, hooks file and metadata; returns (path, sha)."""
    dst = tmp_path / "hookrepo"
    dst.mkdir()
    shutil.copytree(os.path.join(REPO, "amplint"), dst / "amplint", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(os.path.join(REPO, name), dst / name)
    _git(dst, "init", "-q", "-b", "main", env=env)
    _git(dst, "add", "-A", env=env)
    _git(dst, "commit", "-q", "-m", "amplint under test", env=env)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=dst, env=env, capture_output=True, text=True, check=True).stdout.strip()
    return str(dst), sha


def test_pre_commit_hooks_fail_on_misuse_and_pass_after_amplint_fix(tmp_path):
    env = dict(os.environ, **GIT_ENV, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), HOME=str(tmp_path))
    env.pop("AMPLINT_OUTPUT_FORMAT", None)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    hook_repo, sha = _hook_repo(tmp_path, env)

    proj = tmp_path / "project"
    proj.mkdir()
    _git(proj, "init", "-q", "-b", "main", env=env)
    (proj / "train.py").write_text(MISUSE)
    (proj / "clean.py").write_text("import torch\nprint(torch.ones(2))\n")
    (proj / "README.md").write_text("not python\n")
    (proj / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        f"  - repo: {hook_repo}\n"
        f"    rev: {sha}\n"
        "    hooks:\n"
        "      - id: amplint\n"
        "      - id: amplint-fix\n"
        "        stages: [manual]\n"
    )
    _git(proj, "add", "-A", env=env)

    transcript: list[str] = []

    def pre_commit(*args):
        cmd = [sys.executable, "-m", "pre_commit", *args]
        p = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=900)
        out = p.stdout + p.stderr
        transcript.append(f"$ pre-commit {' '.join(args)}\n{out}[exit {p.returncode}]\n")
        return p.returncode, out

    rc, out = pre_commit("run", "--all-files")
    assert rc == 1, out
    assert "amplint" in out and "Failed" in out
    assert "train.py:8:5: AMP001" in out
    assert "clean.py" not in out

    # zero matching files: pre-commit skips the hook, which must not fail
    rc, out = pre_commit("run", "amplint", "--files", "README.md")
    assert rc == 0, out
    assert "Skipped" in out

    # the fix hook rewrites the file (pre-commit fails the run because files changed)
    rc, out = pre_commit("run", "--hook-stage", "manual", "amplint-fix", "--all-files")
    assert rc == 1, out
    assert "files were modified by this hook" in out
    assert (proj / "train.py").read_text() == FIXED
    _git(proj, "add", "-A", env=env)

    rc, out = pre_commit("run", "--all-files")
    assert rc == 0, out
    assert "Passed" in out

    if EVIDENCE:
        os.makedirs(EVIDENCE, exist_ok=True)
        with open(os.path.join(EVIDENCE, "pre-commit-transcript.txt"), "w") as fh:
            fh.write((proj / ".pre-commit-config.yaml").read_text().replace(hook_repo, "<hook repo: copy of this checkout>"))
            fh.write("\n" + "\n".join(transcript))
