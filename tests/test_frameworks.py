"""amplint.model.frameworks: the precision facts (literal, config dict, CLI default, explicit
branch, unknown), the ordered sites, the cached accessor, and the AMP4 family through the CLI."""

from __future__ import annotations

import ast
import json
import os
import textwrap

import pytest

from amplint.analyze import analyze_text
from amplint.model import build_model
from amplint.model import frameworks as fw
from amplint.parse import parse_masked
from amplint.screen import may_contain_amp

from amplint_testutil import FIXTURES, run_amplint


def _facts(src: str):
    src = textwrap.dedent(src)
    return fw.facts(build_model(src, ast.parse(src)))


def _one(src: str, framework: str):
    f = _facts(src)
    assert f is not None
    got = [s for s in f.settings if s.framework == framework]
    assert len(got) == 1, [(s.framework, s.precision) for s in f.settings]
    return got[0].precision, got[0].how


@pytest.mark.parametrize(
    "src,want",
    [
        ('from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16")\n', ("fp16", "literal")),
        ('import accelerate\na = accelerate.Accelerator(mixed_precision="bf16")\n', ("bf16", "literal")),
        ('from accelerate import Accelerator\na = Accelerator(mixed_precision="no")\n', ("no", "literal")),
        ('from accelerate import Accelerator\na = Accelerator()\n', ("unknown", "unknown")),
        ('from accelerate import Accelerator\na = Accelerator(mixed_precision=None)\n', ("unknown", "unknown")),
        # a config dict of the same file
        ('from accelerate import Accelerator\ncfg = {"mixed_precision": "fp16"}\na = Accelerator(mixed_precision=cfg["mixed_precision"])\n', ("fp16", "config")),
        # splatted kwargs
        ('from accelerate import Accelerator\ndef f():\n    kw = dict(mixed_precision="fp16")\n    a = Accelerator(**kw)\n', ("fp16", "literal")),
        # a command-line default
        ('import argparse\nfrom accelerate import Accelerator\np = argparse.ArgumentParser()\np.add_argument("--mixed-precision", default="fp16")\na = Accelerator(mixed_precision=p.parse_args().mixed_precision)\n', ("fp16", "cli-default")),
        # no default, but fp16 is one of the option's choices: an explicit fp16 branch (the
        # historic diffusers scripts whose AMP401/AMP402 bugs were reported by users)
        ('import argparse\nfrom accelerate import Accelerator\np = argparse.ArgumentParser()\np.add_argument("--mixed_precision", default=None, choices=["no", "fp16"])\na = Accelerator(mixed_precision=args.mixed_precision)\n', ("fp16", "branch")),
        # no default and no choices: unknown
        ('import argparse\nfrom accelerate import Accelerator\np = argparse.ArgumentParser()\np.add_argument("--mixed_precision", default=None)\na = Accelerator(mixed_precision=args.mixed_precision)\n', ("unknown", "unknown")),
        # choices without fp16
        ('import argparse\nfrom accelerate import Accelerator\np = argparse.ArgumentParser()\np.add_argument("--mixed_precision", default="no", choices=["no", "bf16"])\na = Accelerator(mixed_precision=args.mixed_precision)\n', ("no", "cli-default")),
        # one arm of a conditional
        ('from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16" if args.fp16 else "no")\n', ("fp16", "branch")),
        # unknown, but the file branches on fp16 explicitly
        ('from accelerate import Accelerator\na = Accelerator()\nif a.mixed_precision == "fp16":\n    dt = 1\n', ("fp16", "branch")),
        # a name assigned a literal
        ('from accelerate import Accelerator\ndef f():\n    mp = "bf16"\n    a = Accelerator(mixed_precision=mp)\n', ("bf16", "literal")),
    ],
)
def test_accelerate_precision(src, want):
    assert _one(src, "accelerate") == want


@pytest.mark.parametrize(
    "value,want",
    [
        ('"16-mixed"', ("fp16", "literal")),
        ("16", ("fp16", "literal")),
        ('"16"', ("fp16", "literal")),
        ('"bf16-mixed"', ("bf16", "literal")),
        ('"32-true"', ("no", "literal")),
        ('"16-true"', ("no", "literal")),
        ("16 if args.amp else 32", ("fp16", "branch")),
        ("cfg.precision", ("unknown", "unknown")),
    ],
)
def test_lightning_precision(value, want):
    assert _one(f"import lightning as L\nt = L.Trainer(precision={value})\n", "lightning") == want


def test_lightning_default_is_32_and_old_package_names_resolve():
    assert _one("import pytorch_lightning as pl\nt = pl.Trainer(max_epochs=1)\n", "lightning") == ("no", "literal")
    assert _one("from lightning.pytorch import Trainer\nt = Trainer(precision=16)\n", "lightning") == ("fp16", "literal")


@pytest.mark.parametrize(
    "kw,want",
    [
        ("fp16=True", ("fp16", "literal")),
        ("fp16=False", ("no", "literal")),
        ("bf16=True", ("bf16", "literal")),
        ("", ("no", "literal")),
        ("fp16=args.fp16", ("fp16", "branch")),
        ("**cfg", ("unknown", "unknown")),
    ],
)
def test_hf_training_arguments(kw, want):
    assert _one(f"from transformers import TrainingArguments\na = TrainingArguments(output_dir='o', {kw})\n", "hf") == want


def test_deepspeed_config_dict():
    src = 'import deepspeed\ncfg = {"fp16": {"enabled": True}}\nengine, opt, _, _ = deepspeed.initialize(model=m, config=cfg)\n'
    f = _facts(src)
    (s,) = f.settings
    assert (s.framework, s.precision, s.target) == ("deepspeed", "fp16", "engine")
    assert _one('import deepspeed\nengine, *_ = deepspeed.initialize(model=m, config="ds.json")\n', "deepspeed") == ("unknown", "unknown")
    assert _one('import deepspeed\ne, o, _, _ = deepspeed.initialize(model=m, config={"bf16": {"enabled": True}})\n', "deepspeed") == ("bf16", "literal")


def test_gradient_accumulation_fact():
    f = _facts('from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16")\n')
    assert f.settings[0].accumulation is False
    f = _facts('from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=1)\n')
    assert f.settings[0].accumulation is False
    f = _facts('from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=n)\n')
    assert f.settings[0].accumulation is True
    f = _facts('from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16")\na.gradient_accumulation_steps = 4\n')
    assert f.settings[0].accumulation is True


def test_sites_record_order_and_context():
    f = _facts(
        """
        from accelerate import Accelerator
        acc = Accelerator(mixed_precision="fp16")
        def train(loader):
            for x in loader:
                with acc.accumulate(model):
                    acc.backward(x)
                    if acc.sync_gradients:
                        acc.clip_grad_norm_(p, 1.0)
                    opt.step()
        """
    )
    fn = next(fn for fn in f.fns if fn.name == "train")
    names = [s.attr for s in fn.sites if s.attr]
    assert names == ["accumulate", "backward", "clip_grad_norm_", "step"]
    clip = next(s for s in fn.sites if s.attr == "clip_grad_norm_")
    back = next(s for s in fn.sites if s.attr == "backward")
    assert fw.sync_guarded(clip) and not fw.sync_guarded(back)
    assert fw.in_accumulate(f, clip) is not None and len(clip.loops) == 1
    assert f.accelerator_setting(fn, clip.receiver).fp16


def test_receiver_named_like_an_accelerator_maps_to_the_files_only_accelerator():
    f = _facts(
        """
        from accelerate import Accelerator
        def main():
            accelerator = Accelerator(mixed_precision="fp16")
            loop(accelerator)
        def loop(accelerator):
            accelerator.backward(loss)
            helper.backward(loss)
        """
    )
    fn = next(fn for fn in f.fns if fn.name == "loop")
    a, b = [s for s in fn.sites if s.attr == "backward"]
    assert f.accelerator_setting(fn, a.receiver).fp16
    assert f.accelerator_setting(fn, b.receiver) is None


def test_cached_and_none_without_a_framework():
    src = "import torch\nx = torch.ones(1)\n"
    m = build_model(src, ast.parse(src))
    assert fw.facts(m) is None and fw.facts(m) is None
    src = 'from accelerate import Accelerator\na = Accelerator(mixed_precision="fp16")\n'
    m = build_model(src, ast.parse(src))
    assert fw.facts(m) is fw.facts(m)


def test_facts_see_functions_the_parser_masks():
    """A long file whose training function holds no torch AMP token: the masked parse drops it,
    the framework facts still see it (they parse the full text)."""
    body = "\n".join(f"def util{i}(x):\n    return x + {i}\n" for i in range(120))
    src = (
        "import torch\nfrom accelerate import Accelerator\n" + body +
        "\ndef main(model, optimizer, loader):\n"
        "    accelerator = Accelerator(mixed_precision='fp16', gradient_accumulation_steps=4)\n"
        "    for x, y in loader:\n"
        "        with accelerator.accumulate(model):\n"
        "            accelerator.unscale_gradients()\n"
        "            optimizer.step()\n"
    )
    assert may_contain_amp(src.encode())
    masked, _dropped = parse_masked(src, "x.py")
    assert not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in masked.body)
    codes = [d.code for d in analyze_text(src, "x.py").diagnostics]
    assert codes == ["AMP402"]
    # the masked tree is not reused; a complete one is (no second parse)
    assert fw.facts(build_model(src, masked)).tree is not masked
    full = ast.parse(src)
    assert fw.facts(build_model(src, full)).tree is full


def test_select_amp4_through_the_cli(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(
        "from accelerate import Accelerator\n"
        "accelerator = Accelerator(mixed_precision='fp16', gradient_accumulation_steps=4)\n"
        "for x in loader:\n"
        "    with accelerator.accumulate(model):\n"
        "        accelerator.backward(model(x))\n"
        "        accelerator.clip_grad_norm_(model.parameters(), 1.0)\n"
        "        optimizer.step()\n"
    )
    r = run_amplint("check", "--no-cache", "--preview", "--select", "AMP4", "--output-format", "json", str(p))
    assert r.returncode == 1, r.stderr
    assert [d["code"] for d in json.loads(r.stdout)] == ["AMP402"]
    r = run_amplint("check", "--no-cache", "--select", "AMP0,AMP1,AMP2,AMP3", "--output-format", "json", str(p))
    assert r.returncode == 0 and json.loads(r.stdout) == []
    r = run_amplint("fix", "--no-cache", "--preview", "--unsafe-fixes", "--select", "AMP4", str(p))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "        if accelerator.sync_gradients:\n            accelerator.clip_grad_norm_" in p.read_text()


@pytest.mark.parametrize("d", ["amp401_accelerate_clip_scaled_grads", "amp402_accelerate_unscale_per_micro_batch",
                               "amp403_fp16_weights_under_framework_amp", "amp405_lightning_manual_backward"])
def test_older_families_stay_silent_on_framework_fixtures(d):
    """These files pass the screen only through its framework clause; the AMP0-3 rules say nothing there."""
    for name in ("before.py", "after.py"):
        path = os.path.join(FIXTURES, d, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                src = fh.read()
            assert [x.code for x in analyze_text(src, path).diagnostics if not x.code.startswith("AMP4")] == []


def test_parameter_default_and_conditional_arm():
    src = (
        "from accelerate import Accelerator\n"
        "class T:\n"
        "    def __init__(self, amp=False, mixed_precision_type='fp16'):\n"
        "        self.accelerator = Accelerator(mixed_precision=mixed_precision_type if amp else 'no')\n"
    )
    assert _one(src, "accelerate") == ("fp16", "branch")
    src = "from accelerate import Accelerator\ndef f(mp='bf16'):\n    return Accelerator(mixed_precision=mp)\n"
    assert _one(src, "accelerate") == ("bf16", "param-default")


def test_a_name_assigned_in_several_branches():
    src = (
        "from accelerate import Accelerator\n"
        "def f(p):\n"
        "    mp = 'no'\n"
        "    if p == 'half':\n"
        "        mp = 'fp16'\n"
        "    elif p == 'bfloat16':\n"
        "        mp = 'bf16'\n"
        "    return Accelerator(mixed_precision=mp)\n"
    )
    assert _one(src, "accelerate") == ("fp16", "branch")
