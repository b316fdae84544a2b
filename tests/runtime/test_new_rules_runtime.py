"""Issue 12's new rules, run on CPU: each before.py fails with torch's own error (or, for
AMP302, keeps none of the scale the harness observes), and AMP011's fix, applied by the real
`amplint fix`, turns a crashing loop into one that matches a hand-written reference with the
same warm-up bit for bit."""

from __future__ import annotations

import os
import shutil

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import harness  # noqa: E402

from amplint_testutil import FIXTURES, run_amplint  # noqa: E402

ERRORS = {
    "amp010_step_closure_with_scaler": "Closure use is not currently supported if GradScaler is enabled.",
    "amp011_update_without_step": "No inf checks were recorded prior to update.",
    "amp012_jump_between_step_and_update": "step() has already been called since the last update().",
}


def _loop(path):
    ((_name, fn),) = harness.load_loops(path)
    return fn


@pytest.mark.parametrize("d", sorted(ERRORS))
def test_before_raises_torchs_error(d):
    res = harness.run_loop(_loop(os.path.join(FIXTURES, d, "before.py")), device="cpu", steps=12)
    assert res.error is not None and ERRORS[d] in res.error, res.error


def test_amp302_before_keeps_no_scale_history():
    fn = _loop(os.path.join(FIXTURES, "amp302_scaler_state_discarded", "before.py"))
    same, detail = harness.compare_to_reference(fn, device="cpu")
    assert not same, detail
    rep = harness.check_all(fn, device="cpu")
    # verify observes the loop's own scaler: rebuilt every epoch, it never backs off or grows as
    # one scaler for the run would
    passed = {c.name: c.passed for c in rep.checks}
    assert passed["1_finishes"] and passed["3_overflow_skip_backoff"] is False and passed["4_growth"] is False


def _reference_with_warmup(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype, warmup=2):
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        if i >= warmup:
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def test_amp011_fix_runs_and_matches_the_reference(tmp_path):
    work = tmp_path / "loop.py"
    shutil.copyfile(os.path.join(FIXTURES, "amp011_update_without_step", "before.py"), work)
    before = harness.run_loop(_loop(work), device="cpu", steps=12)
    assert before.error and "No inf checks were recorded prior to update." in before.error
    r = run_amplint("fix", "--no-cache", "--select", "AMP011", str(work))
    assert r.returncode == 0, r.stdout + r.stderr
    text = work.read_text()
    assert "            scaler.step(optimizer)\n            scaler.update()\n" in text
    after = harness.run_loop(_loop(work), device="cpu", steps=12)
    ref = harness.run_loop(_reference_with_warmup, device="cpu", steps=12)
    assert after.error is None and ref.error is None
    assert after.losses == ref.losses and after.scales == ref.scales
    assert after.params and len(after.params) == len(ref.params)
    assert all(torch.equal(a, b) for a, b in zip(after.params, ref.params))
