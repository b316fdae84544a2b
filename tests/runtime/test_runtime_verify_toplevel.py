"""Issue 32: a script whose loop runs at the top level (argparse defaults, ``if __name__ ==
"__main__":``) is compiled into a function of the names it reads and verified like a loop
function; when its contract cannot be made to hold, ``cannot verify`` (exit 2), never FAIL."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import verify  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "user_scripts")


def run(path: str):
    rows, code = verify.verify([path], device="cpu")
    return [r for r in rows if r.loop != "reference"], code


def test_main_block_argparse_script_passes_bit_for_bit(tmp_path, monkeypatch, capfd):
    path = tmp_path / "toplevel_argparse.py"
    shutil.copy(os.path.join(SCRIPTS, "toplevel_argparse.py"), path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["x", "--no-such-option"])  # sys.argv is ignored
    [row], code = run(str(path))
    assert code == 0, verify.format_table([row])
    assert row.verdict == "pass"
    assert row.loop.endswith("toplevel_argparse.py:<top level>")
    assert all(p is True for p, _, _ in row.checks.values()), row.checks
    assert row.reference[0] and row.reference[1].startswith("bit-identical"), row.reference
    text = "\n".join(row.mapping)
    assert "train_loader <- one epoch of harness batches" in text
    assert "int64 class indices (64,) of 4 classes" in text
    assert "compiled into a function of train_loader, optimizer, device, scaler, model" in text
    assert "argparse defaults (sys.argv ignored), with args.epochs = 1" in text
    assert not (tmp_path / "toplevel_argparse_model.pt").exists()  # torch.save at the end never ran


def test_top_level_loop_with_an_unmappable_name_is_cannot_verify(tmp_path):
    path = tmp_path / "odd.py"
    path.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(8, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler("cpu")
        loader = [(torch.randn(64, 8), torch.randn(64, 1))]
        wobble = object()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.mse_loss(model(x), y) * wobble.factor
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """))
    [row], code = run(str(path))
    assert code == 2
    assert row.verdict == "cannot verify"
    assert "`wobble` (bound by the top-level statement at line 7 (wobble = object()), which verify does " \
           "not run) has no known role; pass --arg wobble=..." in row.cannot


def test_top_level_misuse_still_fails_with_its_cause(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(8, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler("cpu")
        loader = [(torch.randn(64, 8), torch.randn(64, 1))]
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            optimizer.step()
            scaler.update()
    """))
    [row], code = run(str(path))
    assert code == 1, verify.format_table([row])
    assert row.verdict == "FAIL"
    assert {v.code for v in row.violations} & {"AMP004"}, verify.format_table([row])
