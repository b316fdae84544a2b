"""Issue 32: ``amplint verify`` fits its tiny seeded problem to the loop's loss and target
contract, and says ``cannot verify`` (exit 2) instead of FAIL when its data does not fit."""

from __future__ import annotations

import ast
import os
import textwrap

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import verify  # noqa: E402
from amplint.runtime.fit import fit_problem  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "user_scripts")


def run(name_or_path: str):
    path = name_or_path if os.path.isabs(name_or_path) else os.path.join(SCRIPTS, name_or_path)
    rows, code = verify.verify([path], device="cpu")
    return [r for r in rows if r.loop != "reference"], code


def fit(src: str):
    return fit_problem([ast.parse(textwrap.dedent(src))])


def assert_bit_identical_pass(row):
    assert row.verdict == "pass", verify.format_table([row])
    assert all(p is True for p, _, _ in row.checks.values()), row.checks
    assert row.reference[0] and row.reference[1].startswith("bit-identical"), row.reference


def test_recipe_classifier_with_inline_cross_entropy_passes():
    [row], code = run("recipe_classifier.py")
    assert code == 0
    assert_bit_identical_pass(row)
    text = "\n".join(row.mapping)
    assert "data: inputs float32 (64, 8); int64 class indices (64,) of 4 classes, model output (64, 4)" in text
    assert "loss_fn <- cross_entropy (from cross_entropy (line 11))" in text
    assert "Linear(32,4)" in text


def test_squeezed_regression_gets_1d_targets_and_passes():
    [row], code = run("squeeze_regression.py")
    assert code == 0
    assert_bit_identical_pass(row)
    assert any("float targets (64,)" in x and ".squeeze(-1) on the output (line 10)" in x for x in row.mapping)


def test_bce_with_logits_classifier_passes():
    [row], code = run("bce_classifier.py")
    assert code == 0
    assert_bit_identical_pass(row)
    text = "\n".join(row.mapping)
    assert "0./1. float targets (64, 1)" in text
    assert "self.criterion <- binary_cross_entropy_with_logits" in text


def test_fit_reads_the_loss_and_reshaping():
    assert fit("F.cross_entropy(model(x), y)").target == "classes"
    assert fit("loss = nn.NLLLoss()(out, y)").target == "classes"
    p = fit("crit = nn.BCEWithLogitsLoss()\nloss = crit(model(x).squeeze(1), y)")
    assert (p.target, p.squeeze) == ("binary", True)
    assert fit("loss = F.mse_loss(model(x), y.unsqueeze(1))").squeeze
    p = fit("loss = F.mse_loss(model(x), y)")
    assert (p.target, p.squeeze, p.unknown) == ("regress", False, None)
    # x.squeeze(0) on an input, or a view with a shape, is not the output's squeeze
    assert not fit("loss = F.mse_loss(model(x.squeeze(0)), y)").squeeze
    assert not fit("loss = F.mse_loss(model(x).view(64, 1), y)").squeeze
    mixed = fit("a = F.cross_entropy(model(x), y)\nb = F.mse_loss(model(x), y)")
    assert mixed.unknown and "different target contracts" in mixed.unknown


def test_mixed_losses_cannot_be_verified_exit_2(tmp_path):
    p = tmp_path / "mixed.py"
    p.write_text(textwrap.dedent('''
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer, scaler):
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = model(x)
                    loss = F.cross_entropy(out, y) + F.mse_loss(out, y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
    '''))
    [row], code = run(str(p))
    assert code == 2
    assert row.verdict == "cannot verify"
    assert row.cannot.startswith("cannot verify: the loop uses losses with different target contracts")
    assert "cannot verify (see below)" in verify.format_table([row])


def test_data_the_loop_does_not_accept_is_cannot_verify_not_fail(tmp_path):
    # the loop reshapes its targets in a way the static fit cannot see: torch warns about the
    # broadcast, and verify says it cannot verify rather than blaming the loop
    p = tmp_path / "hidden_reshape.py"
    p.write_text(textwrap.dedent('''
        import torch
        import torch.nn.functional as F

        def flat(t):
            return t.reshape(-1)

        def train(model, loader, optimizer, scaler):
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = F.mse_loss(model(x), flat(y))
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
    '''))
    [row], code = run(str(p))
    assert code == 2, verify.format_table([row])
    assert row.verdict == "cannot verify"
    assert "does not fit the loop" in row.cannot and "target size" in row.cannot.lower()
    assert all(p is None for p, _, _ in row.checks.values())


def test_exit_code_fail_wins_over_cannot_verify():
    a = verify.Row("a", "cpu", "float16", cannot="cannot verify: x")
    b = verify.Row("b", "cpu", "float16", error="boom")
    assert verify.exit_code([a]) == 2 and verify.exit_code([a, b]) == 1 and verify.exit_code([]) == 0


def test_conv_net_on_images_uses_the_loops_own_model_class():
    [row], code = run("conv_classifier.py")
    assert code == 0
    assert_bit_identical_pass(row)
    text = "\n".join(row.mapping)
    assert "model     <- the loop's own SmallConvNet() (seeded, built by the harness)" in text
    assert ("data: inputs float32 (64, 1, 16, 16); int64 class indices (64,) of 10 classes, "
            "model output (64, 10)") in text
    assert "model: the loop's own SmallConvNet (reference and fp32 runs too)" in text


def test_a_model_class_that_needs_arguments_falls_back_to_the_bundled_model(tmp_path):
    p = tmp_path / "needs_args.py"
    p.write_text(textwrap.dedent('''
        import torch
        from torch import nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.fc = nn.Linear(8, width)

            def forward(self, x):
                return self.fc(x)

        def train(model, loader, optimizer, scaler):
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
    '''))
    [row], code = run(str(p))
    assert code == 0, verify.format_table([row])
    assert any(x.startswith("  model: the bundled tiny model, not the loop's own: Net() cannot be built "
                            "without arguments (TypeError") for x in row.mapping), row.mapping


def test_unmapped_and_top_level_loops_are_cannot_verify_rows():
    rows, code = run("config_trainer.py")
    assert code == 2 and rows[0].verdict == "cannot verify"
    table = verify.format_table(rows)
    assert "cannot verify (see below)" in table and "ERROR" not in table
    assert rows[0].cannot.startswith("cannot verify ConfigTrainer.fit: parameter `cfg` has no known role")
