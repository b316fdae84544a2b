"""Project mode (issue 15): multi-module projects under fixtures/projects/, each with an
``expected.txt`` of ``path:row:code``. The whole project is checked through the real entry
point, and each file alone (what pre-commit and editors pass) gets the same verdict."""

from __future__ import annotations

import json
from pathlib import Path
import os

import pytest

from amplint_testutil import FIXTURES, run_amplint

PROJECTS = Path(FIXTURES) / "projects"
NAMES = sorted(p.name for p in PROJECTS.iterdir() if (p / "expected.txt").is_file())


def _expected(name: str) -> set[tuple[str, int, str]]:
    out = set()
    for line in (PROJECTS / name / "expected.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path, row, code = line.rsplit(":", 2)
            out.add((path, int(row), code))
    return out


def _found(name: str, *paths: str) -> set[tuple[str, int, str]]:
    root = PROJECTS / name
    p = run_amplint("check", "--no-cache", "--preview", "--exit-zero", "--output-format", "json", *(paths or (".",)), cwd=root)
    assert p.returncode == 0, p.stderr
    out = set()
    for d in json.loads(p.stdout):
        rel = os.path.relpath(os.path.join(root, d["filename"]), root)
        out.add((rel.replace(os.sep, "/"), d["location"]["row"], d["code"]))
    return out


def test_there_are_projects():
    assert {"trainer_pkg", "src_layout", "shared_helper"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_project_findings(name):
    assert _found(name) == _expected(name)


@pytest.mark.parametrize("name", NAMES)
def test_each_file_alone_gets_the_project_verdict(name):
    """The index covers the project even when one file is given (pre-commit, editors)."""
    expected = _expected(name)
    for path in sorted({p for p, _r, _c in expected}):
        assert _found(name, path) == {e for e in expected if e[0] == path}


def test_symlinked_copy_is_reported_once():
    found = _found("shared_helper")
    assert [f for f in found if f[2] == "AMP002"] == [("also_train_a.py", 11, "AMP002")]


def test_helper_that_only_steps_is_silent_when_its_caller_updates():
    assert not any(p == "trainer/utils/amp.py" for p, _r, _c in _found("trainer_pkg"))


def test_helper_outside_the_project_is_unknown_and_silent(tmp_path):
    """An import that does not resolve in the project never produces a finding."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom somelib import save_checkpoint, backward_and_step\n"
        "def train(model, loader, optimizer):\n"
        "    scaler = torch.amp.GradScaler('cuda')\n"
        "    for x in loader:\n"
        "        with torch.autocast('cuda'):\n"
        "            backward_and_step(scaler, model(x), optimizer)\n"
        "    save_checkpoint({'optimizer': optimizer.state_dict()}, 'a.pt')\n"
    )
    p = run_amplint("check", "--no-cache", "--preview", "--output-format", "concise", ".", cwd=tmp_path)
    assert p.returncode == 0, p.stdout


def test_explain_shows_events_scalers_and_resolved_calls():
    root = PROJECTS / "trainer_pkg"
    p = run_amplint("explain", "trainer/engine.py:fit", cwd=root)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "self.scaler (attribute of Trainer): certain, built at line 13" in out
    assert "L21 backward scaler=self.scaler (attribute of Trainer) scaled  [loop@16 loop@17]" in out
    assert "optimizer_step() -> trainer/utils/amp.py:optimizer_step: scaler ops scaler: step/unscale" in out
    assert "mixed_precision() -> trainer/utils/amp.py:mixed_precision: returns autocast (cuda:float16)" in out


def test_explain_prints_each_finding_with_the_facts_behind_it():
    root = PROJECTS / "trainer_pkg"
    p = run_amplint("explain", "trainer/engine.py:fit", cwd=root)
    assert p.returncode == 0, p.stderr
    head = p.stdout.split("\nfunction Trainer.fit")[0]
    assert "findings: 1\n  trainer/engine.py:27:13: AMP301 [error] checkpoint-missing-scaler-state: `save_checkpoint()`" in head
    # the call the finding is on, with the summary of the helper it resolves to, is marked
    assert "     > L27 save_checkpoint() -> trainer/checkpoint.py:save_checkpoint:" in head
    # the whole file: the same findings as `amplint check` on it, with their severities
    c = run_amplint("check", "--no-cache", "--output-format", "concise", "trainer/engine.py", cwd=root)
    checked = [" ".join(line.split()[:2]) for line in c.stdout.splitlines() if ": AMP" in line]
    assert checked == ["trainer/engine.py:27:13: AMP301", "trainer/engine.py:34:17: AMP002", "trainer/engine.py:38:9: AMP301"]
    whole = run_amplint("explain", "trainer/engine.py", cwd=root).stdout
    listed = [line.split()[:3] for line in whole.splitlines() if line.startswith("  trainer/engine.py:")]
    assert [" ".join(x[:2]) for x in listed] == checked
    assert [x[2] for x in listed] == ["[error]", "[warning]", "[error]"]


def test_explain_single_file_finding_marks_its_event(tmp_path):
    src = (Path(FIXTURES) / "amp006_clip_before_unscale" / "before.py").read_text()
    (tmp_path / "train.py").write_text(src)
    p = run_amplint("explain", "train.py:train_loop", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "AMP006 [error] clip-before-unscale" in p.stdout
    facts = p.stdout.split("facts (function train_loop):\n")[1].split("\n\n")[0].splitlines()
    assert [line[5] for line in facts] == [" ", " ", " ", ">", " ", " "]
    assert facts[3].endswith("L15 clip   [loop@10]")
    # a function with no finding says so
    (tmp_path / "clean.py").write_text((Path(FIXTURES) / "amp006_clip_before_unscale" / "after.py").read_text())
    p = run_amplint("explain", "clean.py", cwd=tmp_path)
    assert p.returncode == 0 and "findings: none" in p.stdout


def test_explain_prints_the_core_path_behind_a_finding(tmp_path):
    # AMP004 on the core: the scaled backward's gradients reach the plain step round the loop
    (tmp_path / "train.py").write_text(
        "import torch\nscaler = torch.amp.GradScaler('cuda')\n\nfor x in loader:\n"
        "    opt.step()\n    scaler.scale(model(x)).backward()\n"
    )
    p = run_amplint("explain", "train.py", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    path = p.stdout.split("path (the core's analysis):\n")[1].split("    facts")[0].splitlines()
    assert [line.split()[0] for line in path] == ["L6", "L5"]
    assert "scaled backward" in path[0] and "round the loop" in path[1]
    # AMP001: the step, then the loop whose cycle holds no update
    src = (Path(FIXTURES) / "amp001_missing_scaler_update" / "before.py").read_text()
    (tmp_path / "t1.py").write_text(src)
    out = run_amplint("explain", "t1.py", cwd=tmp_path).stdout
    path = out.split("path (the core's analysis):\n")[1].split("    facts")[0].splitlines()
    assert len(path) == 2 and "the scaler's step" in path[0] and "cycle" in path[1]
    # a finding of a rule that does not fill the path has none
    (tmp_path / "t3.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    assert "path (the core" not in run_amplint("explain", "t3.py", cwd=tmp_path).stdout


def test_explain_unknown_function_and_missing_file(tmp_path):
    root = PROJECTS / "trainer_pkg"
    p = run_amplint("explain", "trainer/engine.py:nope", cwd=root)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == ("error: no function `nope` in trainer/engine.py; its functions: "
                                "Trainer.__init__, Trainer.fit, Trainer.fit_fused, Trainer.snapshot")
    # a function the file has but the model does not walk (no AMP code) is not an error
    (tmp_path / "t.py").write_text("import torch\nscaler = torch.amp.GradScaler()\n\ndef helper(x):\n    return x + 1\n")
    p = run_amplint("explain", "t.py:helper", cwd=tmp_path)
    assert p.returncode == 0 and "function helper: no AMP events" in p.stdout
    p = run_amplint("explain", "missing.py", cwd=root)
    assert p.returncode == 2 and "error: missing.py" in p.stderr


EXPORT = """import torch
from helpers import save_checkpoint


def train(model, loader, optimizer, epochs):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
    save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "final.pt")
"""
HELPERS = """import torch


def save_checkpoint(state, path):
    torch.save(state, path)
"""
RESUME = """import torch


def resume(path, model, optimizer):
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
"""


@pytest.mark.parametrize("resumes", [False, True])
def test_a_checkpoint_saved_once_after_training_matters_only_if_the_project_resumes(tmp_path, resumes):
    """AMP301 on a save after the training loop: an export when no file of the project
    restores an optimizer state (silent), a training checkpoint when one does (another
    module here, so only project mode can tell); the file alone is taken to resume."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "train.py").write_text(EXPORT)
    (tmp_path / "helpers.py").write_text(HELPERS)
    if resumes:
        (tmp_path / "resume.py").write_text(RESUME)
    p = run_amplint("check", "--no-cache", "--preview", "--select", "AMP301", "--output-format", "concise", ".", cwd=tmp_path)
    assert ("train.py:12:5: AMP301" in p.stdout) == resumes, p.stdout
    # pre-commit passing the one file: the index still covers the project
    p = run_amplint("check", "--no-cache", "--preview", "--select", "AMP301", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert ("train.py:12:5: AMP301" in p.stdout) == resumes, p.stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _codes(root: Path, *paths: str) -> set[tuple[str, str]]:
    p = run_amplint("check", "--no-cache", "--preview", "--exit-zero", "--output-format", "json", *(paths or (".",)), cwd=root)
    assert p.returncode == 0, p.stderr
    return {(os.path.relpath(os.path.join(root, d["filename"]), root).replace(os.sep, "/"), d["code"]) for d in json.loads(p.stdout)}


_SAVE_STATE = (
    "import torch\n"
    "def save_state(path, model, optimizer, epoch):\n"
    "    torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'epoch': epoch}, path)\n"
    "def load_state(path, model, optimizer):\n"
    "    state = torch.load(path)\n"
    "    optimizer.load_state_dict(state['optimizer'])\n"
)
_TRAIN_WITH_SAVE_STATE = (
    "import torch\n"
    "from pkg.runtime.common import load_state, save_state\n"
    "def train(model, optimizer, loader, resume=None):\n"
    "    scaler = torch.amp.GradScaler('cuda')\n"
    "    if resume:\n"
    "        load_state(resume, model, optimizer)\n"
    "    for epoch in range(10):\n"
    "        for x in loader:\n"
    "            scaler.scale(model(x)).backward()\n"
    "            scaler.step(optimizer)\n"
    "            scaler.update()\n"
    "        save_state('ckpt.pt', model, optimizer, epoch)\n"
)


def test_package_nested_in_a_monorepo_resolves_from_the_nearest_folder_above(tmp_path):
    """``PyTorch/Proj/pkg/runtime/train.py`` imports ``pkg.runtime.common``: the package is run
    from ``PyTorch/Proj``, not from the repository root, and its helpers are followed."""
    _write(tmp_path, {
        "pyproject.toml": "",
        "PyTorch/Proj/pkg/__init__.py": "",
        "PyTorch/Proj/pkg/runtime/__init__.py": "",
        "PyTorch/Proj/pkg/runtime/common.py": _SAVE_STATE,
        "PyTorch/Proj/pkg/runtime/train.py": _TRAIN_WITH_SAVE_STATE,
    })
    assert _codes(tmp_path) == {("PyTorch/Proj/pkg/runtime/train.py", "AMP301")}
    # the same helper given the scaler state is silent
    (tmp_path / "PyTorch/Proj/pkg/runtime/common.py").write_text(_SAVE_STATE.replace(
        "'epoch': epoch}", "'epoch': epoch, 'scaler': scaler.state_dict()}").replace("optimizer, epoch)", "optimizer, epoch, scaler)"))
    (tmp_path / "PyTorch/Proj/pkg/runtime/train.py").write_text(_TRAIN_WITH_SAVE_STATE.replace(
        "optimizer, epoch)", "optimizer, epoch, scaler)"))
    assert _codes(tmp_path) == set()


def test_repository_root_with_init_and_setup_py_is_the_project_root(tmp_path):
    """A repository whose root holds ``__init__.py`` beside ``setup.py`` (no pyproject.toml):
    its packages import from that root, so the index resolves ``pkg.base`` there, including a
    class re-exported by a star import in the package's ``__init__``."""
    repo = tmp_path / "repo"
    _write(repo, {
        "__init__.py": "",
        "setup.py": "",
        "pkg/__init__.py": "from .base import *\n",
        "pkg/base.py": (
            "import torch\n"
            "class BaseTrainer:\n"
            "    def iterate(self, loader):\n"
            "        for batch in loader:\n"
            "            with torch.autocast('cuda'):\n"
            "                self.step(batch)\n"
        ),
        "pkg/sub.py": (
            "import torch\n"
            "from pkg import BaseTrainer\n"
            "class Trainer(BaseTrainer):\n"
            "    def __init__(self):\n"
            "        self.scaler = torch.amp.GradScaler('cuda')\n"
            "    def step(self, batch):\n"
            "        self.scaler.scale(self.model(batch)).backward()\n"
            "        self.scaler.step(self.optimizer)\n"
            "        self.scaler.update()\n"
        ),
    })
    assert _codes(repo) == {("pkg/sub.py", "AMP002")}
    assert _codes(repo, "pkg/sub.py") == {("pkg/sub.py", "AMP002")}


def _cached(root, *paths):
    p = run_amplint("check", "--preview", "--exit-zero", "--output-format", "json", *(paths or (".",)), cwd=root)
    assert p.returncode == 0, p.stderr
    return {(os.path.relpath(os.path.join(root, d["filename"]), root).replace(os.sep, "/"), d["location"]["row"], d["code"])
            for d in json.loads(p.stdout)}


def test_warm_run_keeps_the_project_verdict_and_sees_a_helper_change(tmp_path):
    """Phase 2 is cached with the run (keyed by every project file's content and the files
    reported): a warm run gives the cold verdict, and an edit to a helper module changes the
    verdict on the unchanged file that calls it."""
    import shutil

    root = tmp_path / "trainer_pkg"
    shutil.copytree(PROJECTS / "trainer_pkg", root)
    expected = {(p, r, c) for p, r, c in _expected("trainer_pkg")}
    assert _cached(root) == expected  # cold: fills the cache
    assert (root / ".amplint_cache").is_dir()
    assert _cached(root) == expected  # warm
    ck = root / "trainer" / "checkpoint.py"
    ck.write_text(ck.read_text().replace("def save_state(state, path):\n    _write(state, path)",
                                         "def save_state(state, path):\n    print(sorted(state), path)"))
    after = expected - {("trainer/engine.py", 38, "AMP301")}
    assert after != expected
    assert _cached(root) == after
    assert _cached(root) == after
    assert _cached(root, "trainer/engine.py") == after  # other files reported: a key of its own
    ck.write_text((PROJECTS / "trainer_pkg" / "trainer" / "checkpoint.py").read_text())
    assert _cached(root, "trainer/engine.py") == expected
    assert _cached(root) == expected


_IDLE_TRAINER = """
import torch


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.grad_scaler = torch.amp.GradScaler("cuda")

    def fit(self, loader, path):
        for x in loader:
            loss = self.model(x).sum()
            loss.backward()
            self.optimizer.step()
            torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, path)

    def resume(self, path):
        self.optimizer.load_state_dict(torch.load(path)["optimizer"])
"""

_SCALED_STEP = """
import torch

from trainer import Trainer


def step(t: Trainer, x):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = t.model(x).sum()
    t.grad_scaler.scale(loss).backward()
    t.grad_scaler.step(t.optimizer)
    t.grad_scaler.update()
"""


def test_a_scaler_attribute_nothing_uses_needs_no_saved_state_until_another_file_uses_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "trainer.py").write_text(_IDLE_TRAINER)
    args = ("check", "--no-cache", "--preview", "--select", "AMP301", "--output-format", "concise")
    p = run_amplint(*args, ".", cwd=tmp_path)
    assert p.returncode == 0, p.stdout  # grad_scaler is only assigned: fp32 training, no scale to keep
    (tmp_path / "steps.py").write_text(_SCALED_STEP)
    for paths in ((".",), ("trainer.py",)):
        p = run_amplint(*args, *paths, cwd=tmp_path)
        assert "trainer.py:16:13: AMP301" in p.stdout, p.stdout  # another file trains with it
