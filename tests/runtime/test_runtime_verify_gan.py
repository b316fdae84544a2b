"""Issue 32: a GAN (generator/discriminator, two optimizers, one or two GradScalers) is not
compared with a reference of another computation: verify says ``cannot verify`` (exit 2) with
the precise reason, never FAIL and never a pass it did not earn."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import verify  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "user_scripts")


@pytest.mark.parametrize("name, opts, scalers", [
    ("gan_one_scaler.py", "`g_opt`, `d_opt`", "1 GradScaler"),
    ("gan_two_scalers.py", "`opt_g`, `opt_d`", "2 GradScalers"),
])
def test_gan_is_cannot_verify_with_the_reason(name, opts, scalers):
    rows, code = verify.verify([os.path.join(SCRIPTS, name)], device="cpu")
    [row] = [r for r in rows if r.loop != "reference"]
    assert code == 2
    assert row.verdict == "cannot verify"
    assert f"optimizers {opts}, {scalers})" in row.cannot
    assert "no generator/discriminator pair and no adversarial reference of the same computation" in row.cannot
