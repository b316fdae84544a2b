"""Precision traps: correct code that must stay clean, each paired with a one-line mutation
that turns it into the bug, which must be reported (so a clean result is not an accident)."""

from __future__ import annotations

import os

import pytest

from amplint.analyze import analyze_text
from amplint.noqa import is_suppressed
from amplint_testutil import FIXTURES


def codes(src: str) -> list[str]:
    """Findings as the CLI would report them (``# noqa`` honoured)."""
    r = analyze_text(src, "t.py")
    assert not r.errors, r.errors
    lines = src.splitlines(keepends=True)
    return sorted(d.code for d in r.diagnostics if not is_suppressed(lines, d.code, [d.row, d.stmt_row]))


def read(name: str) -> str:
    with open(os.path.join(FIXTURES, "clean", name), encoding="utf-8") as fh:
        return fh.read()


# (file, text to replace, replacement, code the mutant must report)
MUTATIONS = [
    ("helpers_and_methods.py", "    def _end_of_step(self):\n        self.grad_scaler.update()\n",
     "    def _end_of_step(self):\n        pass\n", "AMP001"),
    ("helpers_and_methods.py", "        finally:\n            scaler.update()\n", "        finally:\n            pass\n", "AMP001"),
    ("helpers_and_methods.py", "        if update_grad:\n            scaler.update()\n", "        if update_grad:\n            pass\n", "AMP001"),
    ("helpers_and_methods.py", "            self.grad_scaler.step(self.optimizer)\n", "            self.optimizer.step()\n", "AMP004"),
    ("branches_and_accumulation.py", "        scaler.step(optimizer)\n        scaler.update()\n        return loss.detach()\n",
     "        optimizer.step()\n        return loss.detach()\n", "AMP004"),
    ("branches_and_accumulation.py", "    if use_amp:\n        scaler.step(optimizer)\n        scaler.update()\n    else:\n        optimizer.step()\n",
     "    optimizer.step()\n", "AMP004"),
    ("branches_and_accumulation.py", "        scaler_g.step(opt_g)\n", "        scaler_g.step(opt_d)\n", "AMP003"),
    ("branches_and_accumulation.py", "        scaler.step(optimizer)\n        scaler.update()\n\n\ndef scaled_loss_variable",
     "        scaler.step(optimizer)\n\n\ndef scaled_loss_variable", "AMP001"),
    ("branches_and_accumulation.py", "        loss.backward()\n        scaler.step(optimizer)\n        scaler.update()\n\n\ndef two_opt",
     "        loss.backward()\n        optimizer.step()\n\n\ndef two_opt", "AMP004"),
    ("wrappers.py", "            self._scaler.update()\n", "            pass\n", "AMP001"),
    ("frameworks.py", "        with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n            loss = loss_fn(model(x), y)\n        loss.backward()\n",
     "        with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n            loss = loss_fn(model(x), y)\n            loss.backward()\n", "AMP002"),
]


@pytest.mark.parametrize("name", sorted(os.listdir(os.path.join(FIXTURES, "clean"))))
def test_clean_file_has_no_finding(name):
    if name.endswith(".py"):
        assert codes(read(name)) == []


@pytest.mark.parametrize("name,old,new,code", MUTATIONS, ids=[f"{m[0]}-{m[3]}-{i}" for i, m in enumerate(MUTATIONS)])
def test_mutant_is_reported(name, old, new, code):
    src = read(name)
    assert src.count(old) == 1, "mutation anchor must be unique"
    assert code in codes(src.replace(old, new))


@pytest.mark.parametrize(
    "src",
    [
        # fairseq: the name says scaler, the class says otherwise
        "from fairseq.optim import DynamicLossScaler\nscaler = DynamicLossScaler()\nfor x in l:\n    scaler.scale(loss).backward()\n    opt.step()\n",
        # a parameter named scaler that is used like something else
        "import torch\ndef f(scaler, opt, loss):\n    scaler(loss, opt)\n    scaler.scale_loss(loss)\n    opt.step()\n",
        # not in a file that uses torch AMP at all
        "def f(scaler, opt, loss):\n    scaler.scale(loss).backward()\n    opt.step()\n",
    ],
)
def test_name_alone_does_not_make_a_grad_scaler(src):
    assert codes(src) == []


def test_parameter_named_scaler_in_amp_file_is_understood():
    src = "import torch\ndef f(scaler, opt, loss):\n    with torch.autocast('cuda'):\n        pass\n    scaler.scale(loss).backward()\n    opt.step()\n"
    assert codes(src) == ["AMP004"]
