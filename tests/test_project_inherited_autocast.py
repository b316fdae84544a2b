"""A base class in another module runs a subclass's method inside its autocast region
(``with torch.cuda.amp.autocast(self.amp): self.step(data)`` in ``BaseTrainer.iterate()``):
AMP201 follows the region's device and dtype (recorded in the base's summary) into the
subclass's step. Each case: the base's region, extra class body, the step's body, and
whether the subclass file is reported."""

from __future__ import annotations

import json

import pytest

from amplint_testutil import run_amplint

BASE = """import torch
class BaseTrainer:
    def __init__(self, model, amp=True):
        self.model = model
        self.amp = amp
        self.optimizer = torch.optim.Adam(model.parameters())
    def iterate(self, loader):
        for data in loader:
            with {region}:
                self.step(data)
"""
SUB = """import torch
from base import BaseTrainer
class Sub(BaseTrainer):
{extra}    def step(self, data):
{body}
"""
PLAIN = "        loss = self.model(data)\n        loss.backward()\n        self.optimizer.step()\n        self.optimizer.zero_grad()\n"
FP16 = "torch.cuda.amp.autocast(self.amp)"

CASES = {
    "deprecated_cuda_autocast": (FP16, "", PLAIN, True),
    # the base holds no backward of its own: the screen keeps it for its `with autocast: self.step(...)`
    "torch_autocast_cuda": ("torch.autocast('cuda')", "", PLAIN, True),
    "bfloat16": ("torch.autocast('cuda', dtype=torch.bfloat16)", "", PLAIN, False),
    "cpu": ("torch.autocast('cpu')", "", PLAIN, False),
    "disabled": ("torch.autocast('cuda', enabled=False)", "", PLAIN, False),
    "device_not_literal": ("torch.autocast(device_type=self.device)", "", PLAIN, False),
    "scaled_step": (FP16, "", "        loss = self.model(data)\n        self.scaler.scale(loss).backward()\n"
                              "        self.scaler.step(self.optimizer)\n        self.scaler.update()\n", False),
    "backward_only": (FP16, "", "        loss = self.model(data)\n        loss.backward()\n", False),
    "amp_off_arm": (FP16, "", "        loss = self.model(data)\n        if not self.amp:\n            loss.backward()\n"
                              "            self.optimizer.step()\n", False),
    "own_bf16_region": (FP16, "", "        with torch.autocast('cuda', dtype=torch.bfloat16):\n            loss = self.model(data)\n"
                                  "        loss.backward()\n        self.optimizer.step()\n", False),
    "overrides_iterate": (FP16, "    def iterate(self, loader):\n        for data in loader:\n            self.step(data)\n", PLAIN, False),
    "framework_file": (FP16, "    accelerator = None\n", PLAIN, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fp16_region_of_a_base_class_reaches_the_subclass_step(tmp_path, case):
    region, extra, body, reported = CASES[case]
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "base.py").write_text(BASE.format(region=region))
    (tmp_path / "sub.py").write_text(SUB.format(extra=extra, body=body))
    p = run_amplint("check", "--no-cache", "--exit-zero", "--select", "AMP201", "--output-format", "json", ".", cwd=tmp_path)
    got = [(d["filename"].replace("\\", "/").rsplit("/", 1)[-1], d["location"]["row"]) for d in json.loads(p.stdout)]
    assert got == ([("sub.py", 6)] if reported else []), (case, p.stdout)
