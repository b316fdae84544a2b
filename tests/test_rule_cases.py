"""Rule cases the rules' own examples leave out, found by the mutation sample (issue 18):
each pins a branch of AMP008, AMP102 or AMP104 that a mutant changed without any test
noticing. In process, one rule at a time (like test_rule_examples.py)."""

from __future__ import annotations

import pytest

from amplint.analyze import analyze_text
from amplint.rules import ALL_RULES

H = 'import torch\nscaler = torch.amp.GradScaler("cuda")\n'
LOOP = "for x in loader:\n    scaler.scale(loss(x)).backward()\n"


def found(code, src):
    r = analyze_text(src, "t.py", rules={code: ALL_RULES[code]})
    assert not r.errors, r.errors
    return [(d.row, d.message) for d in r.diagnostics]


UNSCALE_TWICE = "`scaler.unscale_(opt)` after `scaler.unscale_(opt)` (line {}) with no `update()` in between raises"


def test_amp008_exactly_two_calls():
    (hit,) = found("AMP008", H + LOOP + "    scaler.unscale_(opt)\n    scaler.unscale_(opt)\n")
    assert hit[0] == 6 and hit[1].startswith(UNSCALE_TWICE.format(5))


def test_amp008_every_repeated_pair_is_reported():
    got = found("AMP008", H + LOOP + "    scaler.unscale_(opt)\n    scaler.unscale_(opt)\n"
                "    scaler.step(opt)\n    scaler.step(opt)\n    scaler.update()\n")
    assert [row for row, _ in got] == [6, 8]
    assert got[1][1].startswith("`scaler.step(opt)` after `scaler.step(opt)` (line 7) with no `update()` in between raises")


def test_amp008_a_call_between_that_may_update_is_trusted():
    # an imported helper that receives the scaler may call update(): not reported
    src = H + "from utils import sync\n" + LOOP + "    scaler.unscale_(opt)\n    sync(scaler)\n    scaler.unscale_(opt)\n"
    assert found("AMP008", src) == []
    # a helper known to leave the scaler alone does not hide the repeat
    src = H + "def log(s):\n    print(s.get_scale())\n\n" + LOOP + "    scaler.unscale_(opt)\n    log(scaler)\n    scaler.unscale_(opt)\n"
    assert [row for row, _ in found("AMP008", src)] == [10]


def test_amp008_a_helper_that_updates_between_is_seen():
    # the core asks the helper what it does to the parameter it is handed the scaler in
    src = H + "def sync(s):\n    s.update()\n\n" + LOOP + "    scaler.unscale_(opt)\n    sync(scaler)\n    scaler.unscale_(opt)\n"
    assert found("AMP008", src) == []


def test_amp102_hasattr_guard_covers_its_own_attribute_only():
    assert found("AMP102", H + "if hasattr(scaler, 'check_overflow'):\n    scaler.check_overflow()\n") == []
    # a guarded use does not hide a later unguarded one
    assert [row for row, _ in found("AMP102", H + "if hasattr(scaler, 'check_overflow'):\n    scaler.check_overflow()\n"
                                    "scaler.frobnicate()\n")] == [5]
    got = found("AMP102", H + "if hasattr(scaler, 'x'):\n    scaler.check_overflow()\nscaler.frobnicate()\n")
    assert [row for row, _ in got] == [4, 5]


def test_amp102_hint_only_for_overflow_and_scale_attributes():
    got = dict(found("AMP102", H + "scaler.cur_scale\nscaler.frobnicate()\nscaler.has_overflow\nscaler.loss_scale\n"))
    hint = "; to tell whether the step was skipped compare `scaler.get_scale()` before and after `update()`"
    assert got == {
        3: "`torch.amp.GradScaler` has no attribute `cur_scale` (AttributeError)" + hint,
        4: "`torch.amp.GradScaler` has no attribute `frobnicate` (AttributeError)",
        5: "`torch.amp.GradScaler` has no attribute `has_overflow` (AttributeError)" + hint,
        6: "`torch.amp.GradScaler` has no attribute `loss_scale` (AttributeError)" + hint,
    }


def test_amp104_decorators_and_the_module_called_directly():
    assert found("AMP104", "from apex import amp\n\n@amp.half_function\ndef f(x):\n    return x\n") == [
        (3, "`amp.half_function` is NVIDIA apex's deprecated AMP API; use native `torch.autocast` and `torch.amp.GradScaler`")]
    # other calls before it are passed over, not the end of the search
    assert [row for row, _ in found("AMP104", "import torch\nimport apex\ntorch.zeros(1)\nprint(2)\napex.amp.initialize(m, o)\n")] == [5]
    assert [m for _, m in found("AMP104", "import apex\napex.amp(m)\n")] == [
        "`amp` is NVIDIA apex's deprecated AMP API; use native `torch.autocast` and `torch.amp.GradScaler`"]


def test_amp104_optional_import_skips_only_its_own_name():
    src = ("try:\n    from apex import amp\nexcept ImportError:\n    amp = None\nimport apex\n"
           "apex.amp.initialize(m, o)\namp.initialize(m, o)\napex.amp.scale_loss(l, o)\n")
    # row 7 uses the optional `amp` unconditionally: apex is then the default path (issue 12)
    assert [row for row, _ in found("AMP104", src)] == [6, 7, 8]
    # the guarded import is then used unconditionally: apex is the default path, reported (issue 12)
    assert [row for row, _ in found("AMP104", "try:\n    import apex.amp\nexcept ImportError:\n    pass\napex.amp.initialize(m, o)\n")] == [5]


# The shape that sent the AMP006/AMP009 move onto core/grads.py back (2026-12-06): the scaled
# backward and the scaler step each sit under `if self.amp:` with a plain fp32 arm; the moved
# rules followed the infeasible path "scaled backward, then the fp32 arm" and reported the
# zero_grad at the top of the next iteration (held-out eval's PyTorch-StudioGAN, eval_g's dragon,
# dev's Chinese-CLIP: all judged fp). It must stay silent whatever implements the rule.
AMP_SPLIT_LOOP = '''import torch


class W:
    def train_generator(self, current_step):
        for step_index in range(self.g_updates):
            self.opt.zero_grad()
            for acml_step in range(self.acml_steps):
                with torch.autocast("cuda", enabled=self.amp):
                    loss = self.gen(current_step).mean()
                if self.amp:
                    self.scaler.scale(loss).backward()
                else:
                    loss.backward()
            if self.amp:
                self.scaler.step(self.opt)
                self.scaler.update()
            else:
                self.opt.step()
'''


def test_amp009_zero_grad_at_loop_top_with_amp_and_fp32_arms_is_silent():
    assert found("AMP009", AMP_SPLIT_LOOP) == []


def test_amp009_zero_grad_at_loop_top_with_scaler_only_is_silent():
    src = AMP_SPLIT_LOOP.replace(
        "                if self.amp:\n                    self.scaler.scale(loss).backward()\n"
        "                else:\n                    loss.backward()\n",
        "                self.scaler.scale(loss).backward()\n").replace(
        "            if self.amp:\n                self.scaler.step(self.opt)\n                self.scaler.update()\n"
        "            else:\n                self.opt.step()\n",
        "            self.scaler.step(self.opt)\n            self.scaler.update()\n")
    assert "if self.amp" not in src
    assert found("AMP009", src) == []


def test_amp006_clip_in_the_fp32_arm_of_an_amp_switch_is_silent():
    # eval_g's dragon shape: the fp32 arm clips plain gradients; the amp arm unscales first
    src = ("import torch\nfrom torch import nn\n\n\ndef train(args, model, optimizer, scaler, loader):\n"
           "    for x in loader:\n        optimizer.zero_grad()\n"
           "        with torch.autocast('cuda', enabled=args.fp16):\n            loss = model(x).mean()\n"
           "        if args.fp16:\n            scaler.scale(loss).backward()\n        else:\n            loss.backward()\n"
           "        if args.fp16:\n            scaler.unscale_(optimizer)\n"
           "            nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
           "        else:\n            nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
           "        if args.fp16:\n            scaler.step(optimizer)\n            scaler.update()\n"
           "        else:\n            optimizer.step()\n")
    assert found("AMP006", src) == []
    assert found("AMP006", src.replace("            scaler.unscale_(optimizer)\n", "")) != []
