"""Issue 32: the reference and the fp32 run use the script's own optimizer class and settings
where they can be built, and only when the reference passes every check with them; else the
harness's SGD, with the reason. Never a FAIL for the harness's choice."""

from __future__ import annotations

import ast
import os
import textwrap

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import verify  # noqa: E402
from amplint.runtime.optim_spec import read_optimizer  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "user_scripts")


def spec_of(src: str, **extra):
    src = textwrap.dedent(src)
    ns = {"torch": torch, **extra}
    exec(compile("\n".join(l for l in src.splitlines() if l.startswith(("import", "from"))), "<s>", "exec"), ns)
    return read_optimizer(ast.parse(src), ns)


def test_reads_literal_settings_through_aliases():
    s, why = spec_of("""
        import torch
        from torch.optim import AdamW as AW
        opt = AW(model.parameters(), lr=3e-4, weight_decay=0.01, betas=(0.9, 0.95), fused=True)
    """)
    assert why is None and s.name == "AdamW" and s.line == 4
    assert dict(s.kwargs) == {"lr": 3e-4, "weight_decay": 0.01, "betas": (0.9, 0.95)}  # fused is the harness's
    s, _ = spec_of("""
        from torch import optim
        opt = optim.SGD(params, 0.1, momentum=0.9)
    """)
    assert s.describe() == "SGD(lr=0.1, momentum=0.9)"


def test_non_literal_setting_is_left_to_the_harness():
    s, why = spec_of("""
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-6)
    """)
    assert s.dropped == ("lr",) and dict(s.kwargs) == {"eps": 1e-6}
    assert s.build([torch.nn.Parameter(torch.zeros(2))], 0.05).param_groups[0]["lr"] == 0.05


def test_none_used_for_look_alikes_several_kinds_and_lbfgs():
    class AdamW:  # not torch's
        def __init__(self, *a, **k):
            pass
    s, why = spec_of("opt = AdamW(model.parameters(), lr=1.0)\n", AdamW=AdamW)
    assert (s, why) == (None, None)
    s, why = spec_of("""
        import torch
        a = torch.optim.AdamW(g.parameters(), lr=1e-3)
        b = torch.optim.AdamW(d.parameters(), lr=4e-3)
    """)
    assert s is None and why.startswith("the script builds several optimizers (AdamW(lr=0.001) (line 3)")
    s, why = spec_of("""
        import torch
        o = torch.optim.LBFGS(m.parameters())
    """)
    assert s is None and "LBFGS (line 3), which does not update each parameter on its own" in why


def test_the_scripts_adamw_is_used_by_loop_reference_and_fp32():
    rows, code = verify.verify([os.path.join(SCRIPTS, "adamw_train.py")], device="cpu")
    [row] = [r for r in rows if r.loop.endswith(":train")]
    assert code == 0 and row.verdict == "pass", verify.format_table(rows)
    text = "\n".join(row.mapping)
    assert "optimizer <- AdamW(betas=(0.9, 0.95), lr=0.01, weight_decay=0.01) #1" in text
    assert "optimizer: the script's AdamW(betas=(0.9, 0.95), lr=0.01, weight_decay=0.01) (line 21; reference and fp32 runs too)" in text
    assert row.reference[0] and row.reference[1].startswith("bit-identical")


def test_settings_the_reference_cannot_learn_with_fall_back_to_sgd(tmp_path):
    src = open(os.path.join(SCRIPTS, "adamw_train.py")).read().replace("lr=1e-2", "lr=1e-7")
    (tmp_path / "tiny_lr.py").write_text(src)
    rows, code = verify.verify([str(tmp_path / "tiny_lr.py")], device="cpu")
    [row] = [r for r in rows if r.loop.endswith(":train")]
    assert code == 0 and row.verdict == "pass"
    text = "\n".join(row.mapping)
    assert "optimizer <- SGD(lr=0.05, momentum=0.9) #1" in text
    assert ("optimizer: the harness's SGD(lr=0.05, momentum=0.9): the script's AdamW(betas=(0.9, 0.95), lr=1e-07, "
            "weight_decay=0.01) (line 21) is not used: the reference loop with it fails 2b_learned") in text


def test_a_misuse_still_fails_with_the_scripts_optimizer(tmp_path):
    """The AMP004 shape (a plain optimizer.step() after the scaled backward) with the script's
    AdamW: FAIL, caught as before."""
    src = open(os.path.join(SCRIPTS, "adamw_train.py")).read().replace(
        "        scaler.step(optimizer)\n", "        optimizer.step()\n")
    (tmp_path / "bypass.py").write_text(src)
    rows, code = verify.verify([str(tmp_path / "bypass.py")], device="cpu")
    [row] = [r for r in rows if r.loop.endswith(":train")]
    assert code == 1 and row.verdict == "FAIL"
    assert "optimizer: the script's AdamW" in "\n".join(row.mapping)
    assert any(v.code == "AMP004" for v in row.violations)


def test_a_step_guard_the_reference_does_not_model_is_cannot_verify_not_fail():
    """`if i >= warmup: scaler.step(); scaler.update()` (AMP011's fixed loop) skips steps the
    reference takes: exit 2 with the guard named, never FAIL; the misuse (update outside the
    guard) still FAILs with its exception."""
    fixed = os.path.join(os.path.dirname(SCRIPTS), "..", "..", "fixtures", "amp011_update_without_step")
    rows, code = verify.verify([os.path.join(fixed, "after.py")], device="cpu")
    [row] = [r for r in rows if r.loop.endswith(":train_loop")]
    assert code == 2 and row.verdict == "cannot verify"
    assert row.cannot.startswith("cannot verify: scaler.step (line 20) runs only when i >= warmup, a condition the reference loop")
    rows, code = verify.verify([os.path.join(fixed, "before.py")], device="cpu")
    [row] = [r for r in rows if r.loop.endswith(":train_loop")]
    assert code == 1 and row.verdict == "FAIL"
    assert "No inf checks were recorded prior to update" in row.checks["1_finishes"][2]


def test_the_mapping_names_the_harness_optimizer_as_built():
    from amplint.runtime import harness, roles

    assert roles.HARNESS_SGD == f"SGD(lr={harness.LR}, momentum={harness.MOMENTUM})"
