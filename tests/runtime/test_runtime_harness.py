"""Harness: reference passes, contracts, misuses fail the expected named check."""

from __future__ import annotations

import os
import re

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import harness, reference  # noqa: E402

import amp_runtime_loops as loops  # noqa: E402

ALL = set(harness.CHECK_NAMES)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reference_passes_all_checks_cpu(dtype):
    rep = harness.check_all(device="cpu", dtype=dtype)
    assert rep.ok, str(rep)
    assert [c.name for c in rep.checks] == harness.CHECK_NAMES
    assert all(c.passed is True for c in rep.checks)
    assert rep.check("4_growth").detail.startswith(
        "scales=[256.0, 256.0, 512.0, 512.0, 512.0, 1024.0, 1024.0]")
    assert "scales[4:7]=[65536.0, 32768.0, 32768.0] skipped[5]=True skipped[6]=False" in \
        rep.check("3_overflow_skip_backoff").detail
    name, passed, detail = rep.check("2_loss_vs_fp32")
    assert passed and "rtol=0.05 atol=0.001" in detail


def test_cpu_rerun_is_bit_identical_and_threads_restored():
    before = torch.get_num_threads()
    a = harness.check_all(device="cpu", dtype="float16")
    b = harness.check_all(device="cpu", dtype="float16")
    assert a.losses == b.losses and a.scales == b.scales
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("fn", [loops.good_loop, loops.good_step, reference.train_step,
                                reference.train_loop])
def test_both_contracts_pass_and_match_reference(fn):
    assert harness.check_all(fn, device="cpu").ok
    ok, detail = harness.compare_to_reference(fn, device="cpu")
    assert ok and detail.startswith("bit-identical"), detail


def test_contract_detection():
    assert harness.contract_of(loops.good_loop) == "loop"
    assert harness.contract_of(loops.good_step) == "step"
    assert harness.contract_of(reference.train_step) == "step"
    assert harness.contract_of(reference.train_loop) == "loop"
    assert harness.contract_of(loops.f2_two_optimizers) is None
    assert harness.contract_of(print) is None


def test_clip_loop_matches_clipped_reference():
    assert harness.check_all(loops.good_clip_loop, device="cpu").ok
    ok, detail = harness.compare_to_reference(loops.good_clip_loop, device="cpu")
    assert ok and detail.startswith("bit-identical") and "clip_grad_norm_(max_norm=1)" in detail, detail
    # the reference was configured from what the loop did, not guessed from a list of thresholds
    res = harness.run_loop(loops.good_clip_loop, steps=4)
    assert res.clip_norms == [1.0] * 4 and harness.observed_config(res).clip == 1.0


def test_no_scaler_loop_skips_checks_3_4():
    rep = harness.check_all(loops.no_scaler_loop, device="cpu", dtype="bfloat16")
    assert rep.ok
    assert rep.check("3_overflow_skip_backoff").passed is None
    assert rep.check("4_growth").passed is None


def test_fp16_without_scaler_fails_checks_3_4():
    rep = harness.check_all(loops.no_scaler_loop, device="cpu", dtype="float16")
    assert set(rep.failed()) == {"3_overflow_skip_backoff", "4_growth"}
    assert "float16 autocast without a GradScaler" in rep.check("4_growth").detail


def _accum_loop(n, *, flush=False):
    def loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
        optimizer.zero_grad(set_to_none=True)
        for i, (x, y) in enumerate(batches):
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y) / n
            scaler.scale(loss).backward()
            if (i + 1) % n == 0 or (flush and i + 1 == len(batches)):
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
    return loop


@pytest.mark.parametrize("n", [2, 3])
def test_accumulation_is_observed_and_verified_against_a_configured_reference(n):
    loop = _accum_loop(n)
    rep = harness.check_all(loop, device="cpu", compare=True)
    assert rep.config.accum == n and not rep.config.flush
    assert rep.ok, str(rep)
    assert rep.reference[0] and rep.reference[1].startswith("bit-identical"), rep.reference
    # check 3 injected inf into all n micro-batches of optimizer step 5
    assert rep.inject_scales[4:7] == [65536.0, 32768.0, 32768.0]
    assert rep.growth_scales == harness.GROWTH_EXPECTED


def test_accumulation_with_a_final_partial_step():
    rep = harness.check_all(_accum_loop(3, flush=True), device="cpu", compare=True)  # 50 = 16*3 + 2
    assert (rep.config.accum, rep.config.flush) == (3, True)
    assert rep.ok and rep.reference[0], rep.reference


def test_several_optimizers_split_the_model_and_match_the_reference():
    def two_opt_loop(model, batches, loss_fn, optimizers, scaler, *, device_type, dtype):
        for x, y in batches:
            for o in optimizers:
                o.zero_grad(set_to_none=True)
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            for o in optimizers:
                scaler.step(o)
            scaler.update()

    inv = harness.FnInvoker(two_opt_loop, "loop", n_optimizers=2)
    rep = harness.check_all(inv, device="cpu", compare=True)
    assert rep.ok and rep.config.n_optimizers == 2 and rep.reference[0], rep.reference
    model, _ = harness.make_model(0, "cpu")
    opts = harness.make_optimizers(model, 2)
    assert [len(o.param_groups[0]["params"]) for o in opts] == [2, 2]
    # one SGD over everything trains bit for bit like the split (SGD is per parameter)
    assert harness.run_loop(inv, steps=10).snaps[-1].equal(harness.run_loop(loops.good_loop, steps=10).snaps[-1])


def test_cuda_hardcoded_loop_runs_on_cpu_with_a_note():
    def cuda_loop(model, batches, loss_fn, optimizer):
        scaler = torch.amp.GradScaler()  # default device: cuda
        for x, y in batches:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    class Inv:
        kind, n_optimizers = "loop", 1

        def __call__(self, env, batch=None, index=None):
            return cuda_loop(env.model, env.batches, env.loss_fn, env.optimizer)

    if torch.cuda.is_available():
        pytest.skip("CUDA present: nothing to translate")
    rep = harness.check_all(Inv(), device="cpu", compare=True)
    assert rep.ok, str(rep)
    assert any("GradScaler and autocast for 'cuda' ran on cpu" in n for n in rep.notes), rep.notes
    assert rep.config.dtype == torch.float16 and rep.reference[0]  # CUDA autocast's default dtype


def test_divergence_names_the_first_step_and_values():
    ok, detail = harness.compare_to_reference(loops.d_clip_before_unscale_loop, device="cpu")
    assert not ok
    # measured on this CPU: loss 0.68722 vs reference 0.68722, max |param - reference| 0.0183
    assert re.match(r"first divergence at optimizer step 0 \(batch 0\), loss 0\.687\d* vs reference 0\.687\d*, "
                    r"scale after the step 65536 vs 65536, max \|param - reference\| 0\.01\d*", detail), detail
    rep = harness.check_all(loops.d_clip_before_unscale_loop, device="cpu")
    assert "first divergence at optimizer step 0" in rep.check("2_loss_vs_fp32").detail


def test_reference_gradient_accumulation_and_clip_run():
    x, y = harness.make_data(0, "cpu")
    model, opt = harness.make_model(0, "cpu")
    scaler = reference.make_scaler("cpu")
    with harness.cpu_threads("cpu"):
        losses = reference.train_loop(model, harness.make_batches(x, y, 8), harness.loss_fn, opt, scaler,
                                      device_type="cpu", dtype=torch.float16, clip=1.0, accum_steps=4)
    assert len(losses) == 8
    assert scaler.get_scale() == 65536.0  # two optimizer steps, no growth yet
    with pytest.raises(ValueError):
        reference.train_step(model, (x, y), harness.loss_fn, opt, scaler, device_type="cpu",
                             dtype=torch.float16, accum_steps=2, micro_index=2)


def _failed(fn, **kw):
    return set(harness.check_all(fn, device="cpu", **kw).failed())


def test_a_no_update_raises_torch_error():
    rep = harness.check_all(loops.a_no_update_loop, device="cpu")
    c = rep.check("1_finishes")
    assert c.passed is False
    assert "RuntimeError: step() has already been called since the last update()." in c.detail
    assert "loops.py" in c.detail  # points at the user's line, not the harness


def test_b_plain_optimizer_step_fails():
    failed = _failed(loops.b_plain_step_loop)
    # SGD+momentum on grads 65536x too large diverges: losses become non-finite.
    assert {"2_loss_vs_fp32", "3_overflow_skip_backoff", "4_growth"} <= failed


def test_c_unscaled_backward_fails_loss_and_learning():
    rep = harness.check_all(loops.c_unscaled_backward_loop, device="cpu")
    assert set(rep.failed()) == {"2_loss_vs_fp32", "2b_learned"}
    assert rep.check("3_overflow_skip_backoff").passed and rep.check("4_growth").passed


def test_c_fresh_scaler_is_loud():
    c = harness.check_all(loops.c_fresh_step, device="cpu").check("1_finishes")
    assert "AssertionError: Attempted step but _scale is None." in c.detail


def test_d_clip_before_unscale_stalls():
    assert _failed(loops.d_clip_before_unscale_loop) == {"2_loss_vs_fp32", "2b_learned"}


def test_h_backward_in_autocast_passes_harness():
    assert harness.check_all(loops.h_backward_in_autocast_loop, device="cpu").ok


def test_g_two_scalers_trains_differently():
    assert "2_loss_vs_fp32" in _failed(loops.g_two_scalers_loop)
    ok, _ = harness.compare_to_reference(loops.g_two_scalers_loop, device="cpu")
    assert not ok


@pytest.mark.parametrize("fn, text", [
    (loops.f_update_twice_loop, "AssertionError: No inf checks were recorded prior to update."),
    (loops.z_zero_grad_between_loop, "AssertionError: No inf checks were recorded for this optimizer."),
    (loops.e_unscale_twice_loop,
     "RuntimeError: unscale_() has already been called on this optimizer since the last update()."),
    (loops.n_step_twice_loop, "RuntimeError: step() has already been called since the last update()."),
])
def test_loud_misuses_fail_check_1_with_torch_text(fn, text):
    rep = harness.check_all(fn, device="cpu")
    assert rep.check("1_finishes").passed is False
    assert text in rep.check("1_finishes").detail


def test_observers_are_removed():
    import torch.nn.utils.clip_grad as cg
    from torch.amp import autocast_mode as am

    gs = torch.amp.GradScaler
    targets = [(gs, "__init__"), (gs, "scale"), (gs, "step"), (gs, "update"),
               (am.autocast, "__init__"), (am.autocast, "__enter__"), (cg, "_clip_grads_with_norm_")]
    before = [o.__dict__[n] for o, n in targets]
    harness.run_loop(loops.good_clip_loop, steps=2)
    harness.run_loop(loops.a_no_update_loop, steps=2)  # raises inside
    assert [o.__dict__[n] for o, n in targets] == before


def test_load_loops_picks_training_functions_without_running_the_file(tmp_path):
    p = tmp_path / "my_loops.py"
    p.write_text(
        "import torch\n"
        "def helper(x):\n    return x\n"
        "def train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):\n"
        "    x, y = batch\n"
        "    optimizer.zero_grad(set_to_none=True)\n"
        "    with torch.autocast(device_type, dtype=dtype):\n"
        "        loss = loss_fn(model(x), y)\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n"
        "    return loss.item()\n"
        "def fit(model, loader, optimizer, scaler):\n"
        "    for batch in loader:\n"
        "        train_step(model, batch, torch.nn.functional.mse_loss, optimizer, scaler,\n"
        "                   device_type='cpu', dtype=torch.float16)\n"
        "raise SystemExit('the top level ran')\n"
    )
    found = harness.load_loops(p)
    assert [os.path.basename(n) for n, _ in found] == ["my_loops.py:fit"]  # train_step: through fit
    assert found[0][1].kind == "loop"
    assert harness.check_all(found[0][1], device="cpu").ok
    again = harness.load_loops(p)
    assert again[0][1].target is not found[0][1].target  # a fresh module each time


def test_device_unavailable():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(harness.DeviceUnavailable):
        harness.check_all(device="cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reference_passes_on_cuda(dtype):
    rep = harness.check_all(device="cuda", dtype=dtype)
    assert rep.ok, str(rep)
    assert harness.compare_to_reference(loops.good_loop, device="cuda", dtype=dtype)[0]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("n", [1, 2])
def test_accumulation_and_translation_free_loops_on_cuda(n):
    rep = harness.check_all(_accum_loop(n), device="cuda", compare=True)
    assert rep.ok, str(rep)
    assert rep.config.accum == n and rep.reference[0], rep.reference
    assert not rep.notes  # nothing is moved between devices on a CUDA run


def test_a_loop_that_halves_the_model_fails_without_crashing_the_harness():
    def half_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
        model.half()
        for x, y in batches:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x.half()), y.half())
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    rep = harness.check_all(half_loop, device="cpu")
    assert "ValueError: Attempting to unscale FP16 gradients." in rep.check("1_finishes").detail
