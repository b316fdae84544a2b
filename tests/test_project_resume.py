"""Project facts that decide AMP301: whether anything resumes from an optimizer state, and
module resolution when a package is also reachable through a symlinked directory."""

from __future__ import annotations

import json
import os

import pytest

from amplint_testutil import run_amplint

SAVE = (
    "import torch\n"
    "def save_checkpoint(model, optimizer, path):\n"
    "    def get_state_dict(m):\n"
    "        return m.state_dict()\n"
    "    torch.save({'model': get_state_dict(model), 'optimizer': get_state_dict(optimizer)}, path)\n"
)
GENERIC_RESTORE = (
    "import torch\n"
    "def restart_from_checkpoint(path, **kwargs):\n"
    "    ckpt = torch.load(path)\n"
    "    for key, value in kwargs.items():\n"
    "        value.load_state_dict(ckpt[key])\n"
)
TRAIN = (
    "import torch\n"
    "from pkg.utils import save_checkpoint{extra_import}\n"
    "def train(model, optimizer, loader, resume=None):\n"
    "    scaler = torch.amp.GradScaler('cuda')\n"
    "{restore}"
    "    for epoch in range(10):\n"
    "        for x in loader:\n"
    "            scaler.scale(model(x)).backward()\n"
    "            scaler.step(optimizer)\n"
    "            scaler.update()\n"
    "        save_checkpoint(model, optimizer, 'ckpt.pt')\n"
)


def _project(root, restore: bool):
    (root / "pyproject.toml").write_text("")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(SAVE + (GENERIC_RESTORE if restore else ""))
    (root / "pkg" / "train.py").write_text(TRAIN.format(
        extra_import=", restart_from_checkpoint" if restore else "",
        restore="    if resume:\n        restart_from_checkpoint(resume, model=model, optimizer=optimizer)\n" if restore else "",
    ))


def _findings(root, *args):
    p = run_amplint("check", "--no-cache", "--preview", "--exit-zero", "--select", "AMP301", "--output-format", "json",
                    *(args or (".",)), cwd=root)
    assert p.returncode == 0, p.stderr
    return sorted((os.path.relpath(os.path.join(root, d["filename"]), root).replace(os.sep, "/"), d["location"]["row"])
                  for d in json.loads(p.stdout))


def test_a_generic_restore_helper_counts_as_resuming(tmp_path):
    """`restart_from_checkpoint(path, model=model, optimizer=optimizer)` restores the optimizer
    through `value.load_state_dict(...)`: the project resumes, so the checkpoint without the
    scaler state is reported (the dict's optimizer state is read through a helper)."""
    _project(tmp_path, restore=True)
    assert _findings(tmp_path) == [("pkg/train.py", 12)]


def test_a_project_that_never_restores_an_optimizer_is_silent(tmp_path):
    _project(tmp_path, restore=False)
    assert _findings(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_package_reached_through_a_symlinked_directory_is_reported_under_its_real_path(tmp_path):
    """`examples/v2/pkg -> ../../pkg` sorts before `pkg/`: the walk takes the real tree first,
    so the file is reported once, as `pkg/train.py`, and `from pkg.utils import ...` resolves."""
    _project(tmp_path, restore=True)
    (tmp_path / "examples" / "v2").mkdir(parents=True)
    try:
        os.symlink(os.path.join("..", "..", "pkg"), tmp_path / "examples" / "v2" / "pkg", target_is_directory=True)
    except OSError:
        pytest.skip("symlinks not permitted")
    assert _findings(tmp_path) == [("pkg/train.py", 12)]


def test_an_inherited_save_is_silent_when_every_subclass_keeps_or_saves_its_scaler(tmp_path):
    """fixtures/projects/inherited_trainer without AMPTrainer: the other subclasses replace the
    save (directly or through a middle class) or save the scaler state themselves."""
    import shutil

    from amplint_testutil import FIXTURES

    root = tmp_path / "p"
    shutil.copytree(os.path.join(FIXTURES, "projects", "inherited_trainer"), root)
    src = (root / "trainers" / "amp_trainer.py").read_text()
    start, end = src.index("class AMPTrainer"), src.index("class KeepsScaler")
    (root / "trainers" / "amp_trainer.py").write_text(src[:start] + src[end:])
    assert _findings(root) == []
    assert _findings(tmp_path / "p", "trainers/base.py") == []


# --------------------------------------------------------------------------------------------
# A script's restores are those its code can reach: an imported module's restore in a function
# or class nothing refers to does not make the script resumable (it was: any restoring module
# imported counted). Each case: the modules beside train.py, train.py's import line, the code
# after its loop, and whether its periodic checkpoint without the scaler is reported.

TRAIN_SCRIPT = """import torch
{imports}
def main(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(3):
        for x in loader:
            with torch.autocast("cuda"):
                loss = model(x)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        torch.save({{"model": model.state_dict(), "optimizer": optimizer.state_dict()}}, "last.pt")
{body}
if __name__ == "__main__":
    main(None, None, [])
"""
LOAD = "def load(path, model, optimizer):\n    state = torch.load(path)\n    optimizer.load_state_dict(state['optimizer'])\n"
CKPT = "import torch\n" + LOAD + "\ndef other():\n    return 1\n"
RESUMER = "import torch\nclass Resumer:\n    def resume(self, optimizer):\n        optimizer.load_state_dict(torch.load('x'))\ndef other():\n    return 1\n"

REACH = {
    "imported_unused": ({"ckpt.py": CKPT}, "import ckpt", "    ckpt.other()\n", False),
    "called_attr": ({"ckpt.py": CKPT}, "import ckpt", "    ckpt.load('x', model, optimizer)\n", True),
    "from_import_unused": ({"ckpt.py": CKPT}, "from ckpt import load, other", "    other()\n", False),
    "from_import_called": ({"ckpt.py": CKPT}, "from ckpt import load, other", "    load('x', model, optimizer)\n", True),
    "alias_called": ({"ckpt.py": CKPT}, "from ckpt import load as restore_all", "    restore_all('x', model, optimizer)\n", True),
    # `from X import *` was not followed at all: the restore it brings was missed
    "star_called": ({"ckpt.py": CKPT}, "from ckpt import *", "    load('x', model, optimizer)\n", True),
    "through_helper": ({"ckpt.py": CKPT, "helpers.py": "import ckpt\ndef run(m, o):\n    ckpt.load('x', m, o)\n"},
                       "import helpers", "    helpers.run(model, optimizer)\n", True),
    "through_helper_unused": ({"ckpt.py": CKPT, "helpers.py": "import ckpt\ndef run(m, o):\n    return ckpt.other()\n"},
                              "import helpers", "    helpers.run(model, optimizer)\n", False),
    "module_level_restore": ({"ckpt.py": "import torch\nopt = None\nopt.load_state_dict(torch.load('x'))\ndef other():\n    return 1\n"},
                             "import ckpt", "    ckpt.other()\n", True),
    "decorated_restore": ({"ckpt.py": "import torch\nREG = {}\ndef register(f):\n    REG[f.__name__] = f\n    return f\n@register\n"
                                      + LOAD + "def other():\n    return 1\n"}, "import ckpt", "    ckpt.other()\n", True),
    "class_used": ({"ckpt.py": RESUMER}, "import ckpt", "    ckpt.Resumer().resume(optimizer)\n", True),
    "class_unused": ({"ckpt.py": RESUMER}, "import ckpt", "    ckpt.other()\n", False),
    "internal_caller": ({"ckpt.py": CKPT.replace("def other():\n    return 1\n", "def other(p, m, o):\n    return load(p, m, o)\n")},
                        "import ckpt", "    ckpt.other('x', model, optimizer)\n", True),
    "getattr_string": ({"ckpt.py": CKPT}, "import ckpt", "    getattr(ckpt, 'load')('x', model, optimizer)\n", True),
    "own_restore": ({"ckpt.py": CKPT}, "import ckpt", "def resume(path, optimizer):\n    optimizer.load_state_dict(torch.load(path))\n", True),
}


@pytest.mark.parametrize("case", sorted(REACH))
def test_a_script_resumes_only_through_restores_its_code_can_reach(tmp_path, case):
    files, imports, body, reported = REACH[case]
    (tmp_path / "pyproject.toml").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    (tmp_path / "train.py").write_text(TRAIN_SCRIPT.format(imports=imports, body=body))
    got = [f for f in _findings(tmp_path) if f[0] == "train.py"]
    assert got == ([("train.py", 12)] if reported else []), case
