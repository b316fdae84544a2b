"""Sanitizer: each misuse is reported with its code at the user's file:line; patches removed."""

from __future__ import annotations

import io
import os

import pytest

torch = pytest.importorskip("torch")

import amp_runtime_loops as loops  # noqa: E402
from amp_runtime_loops import line_of  # noqa: E402

from amplint.runtime import harness, reference  # noqa: E402
from amplint.runtime.sanitizer import AmpViolation, Sanitizer, measure_overhead, sanitize  # noqa: E402

LOOPS_FILE = loops.__file__


def _trace(fn, steps=3, **kw):
    with sanitize(report=False, **kw) as san:
        with harness.cpu_threads("cpu"):
            res = harness.run_loop(fn, steps=steps)
    return san, res


def _where(san):
    return {(v.code, os.path.basename(v.path), v.line) for v in san.violations}


CASES = [
    # (loop, code, tag, torch error text expected in the harness run or None)
    (loops.a_no_update_loop, "AMP001", "a", "step() has already been called since the last update()."),
    (loops.b_plain_step_loop, "AMP004", "b", None),
    (loops.c_unscaled_backward_loop, "AMP005", "c", None),
    (loops.c_fresh_step, "AMP005", "c_fresh", "Attempted step but _scale is None."),
    (loops.d_clip_before_unscale_loop, "AMP006", "d", None),
    (loops.h_backward_in_autocast_loop, "AMP002", "h", None),
    (loops.g_two_scalers_loop, "AMP003", "g", None),
    (loops.f_update_twice_loop, "AMP007", "f", "No inf checks were recorded prior to update."),
    (loops.z_zero_grad_between_loop, "AMP009", "z", "No inf checks were recorded for this optimizer."),
    (loops.e_unscale_twice_loop, "AMP008", "e", "unscale_() has already been called on this optimizer"),
    (loops.n_step_twice_loop, "AMP008", "n", "step() has already been called since the last update()."),
]


@pytest.mark.parametrize("fn, code, tag, torch_error", CASES, ids=[c[2] for c in CASES])
def test_misuse_reported_at_user_line(fn, code, tag, torch_error):
    san, res = _trace(fn)
    assert _where(san) == {(code, "amp_runtime_loops.py", line_of(LOOPS_FILE, tag))}, [
        str(v) for v in san.violations]
    v = san.violations[0]
    assert os.path.samefile(v.path, LOOPS_FILE)
    assert str(v).startswith(f"{v.path}:{v.line}: {code} ")
    if torch_error:  # recorded although torch raised right after
        assert res.error and torch_error in res.error
    else:
        assert res.error is None


def test_f2_update_between_optimizers():
    with sanitize(report=False) as san:
        loops.f2_two_optimizers()
    assert _where(san) == {("AMP007", "amp_runtime_loops.py", line_of(LOOPS_FILE, "f2"))}


@pytest.mark.parametrize("fn", [loops.two_optimizers_ok, loops.accumulation_ok])
def test_canonical_variants_are_clean(fn):
    with sanitize(report=False) as san:
        fn()
    assert san.violations == [], [str(v) for v in san.violations]


@pytest.mark.parametrize("fn", [reference.train_loop, reference.train_step, loops.good_clip_loop,
                                loops.no_scaler_loop])
def test_reference_is_clean_and_numerically_unchanged(fn):
    with harness.cpu_threads("cpu"):
        plain = harness.run_loop(fn, steps=20)
    san, traced = _trace(fn, steps=20)
    assert san.violations == []
    assert plain.losses == traced.losses and plain.scales == traced.scales
    assert all(torch.equal(a, b) for a, b in zip(plain.params, traced.params))


def test_check_all_under_sanitizer_is_clean():
    with sanitize(report=False) as san:
        assert harness.check_all(device="cpu").ok
    assert san.violations == []


def test_patches_removed_identity_restored():
    import torch.nn.utils.clip_grad as cg
    import torch.optim.optimizer as oo
    from torch.amp import autocast_mode as am

    gs = torch.amp.GradScaler
    targets = [(gs, "scale"), (gs, "unscale_"), (gs, "step"), (gs, "update"),
               (torch.autograd, "backward"), (cg, "_get_total_norm"), (torch.nn.utils, "get_total_norm"),
               (am.autocast, "__enter__"), (am.autocast, "__exit__"), (torch.optim.Optimizer, "zero_grad")]
    before = [getattr(o, n) for o, n in targets]
    hooks_before = dict(oo._global_optimizer_pre_hooks)
    with sanitize(report=False):
        during = [getattr(o, n) for o, n in targets]
        assert all(a is not b for a, b in zip(before, during))
        assert len(oo._global_optimizer_pre_hooks) == len(hooks_before) + 1
    assert all(a is b for a, b in zip(before, [getattr(o, n) for o, n in targets]))
    assert dict(oo._global_optimizer_pre_hooks) == hooks_before
    # also after an exception inside the block
    with pytest.raises(ZeroDivisionError):
        with sanitize(report=False):
            1 / 0
    assert all(a is b for a, b in zip(before, [getattr(o, n) for o, n in targets]))


def test_raise_on_violation_raises_before_torch():
    x, y = harness.make_data(0, "cpu")
    model, opt = harness.make_model(0, "cpu")
    scaler = torch.amp.GradScaler("cpu")
    with pytest.raises(AmpViolation) as ei:  # not torch's RuntimeError: raised before the call
        with sanitize(report=False, raise_on_violation=True) as san:
            with torch.autocast("cpu", dtype=torch.float16):
                loss = harness.loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.unscale_(opt)  # <raise>
    assert ei.value.violation.code == "AMP008"
    assert ei.value.violation.line == line_of(__file__, "raise")
    assert san.codes == ["AMP008"]


def test_report_summary_to_stream():
    buf = io.StringIO()
    with sanitize(stream=buf):
        with harness.cpu_threads("cpu"):
            harness.run_loop(loops.b_plain_step_loop, steps=3)
    out = buf.getvalue()
    assert "AMP004" in out and "amp_runtime_loops.py:%d" % line_of(LOOPS_FILE, "b") in out
    assert "(x3)" in out  # one entry per location, with a count


def test_loop_ending_without_update_is_amp001():
    x, y = harness.make_data(0, "cpu")
    model, opt = harness.make_model(0, "cpu")
    scaler = torch.amp.GradScaler("cpu")
    with Sanitizer(report=False) as san:
        with torch.autocast("cpu", dtype=torch.float16):
            loss = harness.loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)  # <end>
    assert _where(san) == {("AMP001", os.path.basename(__file__), line_of(__file__, "end"))}


def test_pre_imported_clip_is_seen():
    from torch.nn.utils import clip_grad_norm_ as pre_imported

    x, y = harness.make_data(0, "cpu")
    model, opt = harness.make_model(0, "cpu")
    scaler = torch.amp.GradScaler("cpu")
    with Sanitizer(report=False) as san:
        with torch.autocast("cpu", dtype=torch.float16):
            loss = harness.loss_fn(model(x), y)
        scaler.scale(loss).backward()
        pre_imported(model.parameters(), 1.0)  # <preclip>
        scaler.step(opt)
        scaler.update()
    assert _where(san) == {("AMP006", os.path.basename(__file__), line_of(__file__, "preclip"))}


def test_measure_overhead():
    out = measure_overhead(steps=20, repeats=1)
    assert set(out) == {"plain_s", "traced_s", "ratio"}
    assert out["plain_s"] > 0 and out["traced_s"] > 0


def test_stats_count_scalers_calls_and_why_one_is_disabled():
    x, y = harness.make_data(0, "cpu")
    model, opt = harness.make_model(0, "cpu")
    with sanitize(report=False) as san:
        on = torch.amp.GradScaler("cpu")  # <on>
        off = torch.amp.GradScaler("cpu", enabled=False)
        for s in (on, off):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = harness.loss_fn(model(x), y)
            s.scale(loss).backward()
            s.step(opt)
            s.update()
    st = san.stats()
    first, second = st["scalers"]
    assert first == {"type": "torch.amp.GradScaler", "device": "cpu", "enabled": True, "reason": None,
                     "created_at": f"{__file__}:{line_of(__file__, 'on')}", "scale": 1, "unscale_": 0,
                     "step": 1, "update": 1}  # the unscale_ that step() does itself is not a call
    assert second["enabled"] is False and second["reason"] == "enabled=False was passed"
    assert (second["scale"], second["step"], second["update"]) == (1, 1, 1)
    assert st["autocast"] == [{"device": "cpu", "dtype": "bfloat16", "enabled": True, "count": 2}]
    assert (st["backward"], st["scaled_backward"], st["optimizer_steps"]) == (2, 1, 2)  # off does not scale
    assert st["checked"] and st["active"] and san.violations == []
    san.reset()
    assert san.stats()["scalers"] == [] and not san.stats()["active"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the default-device scaler is enabled with CUDA")
def test_default_device_scaler_without_cuda_is_disabled_for_that_reason():
    import warnings

    with sanitize(report=False) as san, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.amp.GradScaler()  # <default>
    [info] = san.stats()["scalers"]
    assert (info["device"], info["enabled"], info["reason"]) == ("cuda", False, "CUDA is not available")
    [w] = [w for w in caught if "CUDA is not available" in str(w.message)]
    assert (w.filename, w.lineno) == (__file__, line_of(__file__, "default"))  # the user's line


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fn, code", [(loops.b_plain_step_loop, "AMP004"),
                                      (loops.d_clip_before_unscale_loop, "AMP006"),
                                      (loops.h_backward_in_autocast_loop, "AMP002")])
def test_misuse_reported_on_cuda(fn, code):
    with sanitize(report=False) as san:
        harness.run_loop(fn, device="cuda", steps=3)
    assert {v.code for v in san.violations} == {code}
    assert san.stats()["scalers"][0]["device"] == "cuda" and san.stats()["scalers"][0]["enabled"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_canonical_loop_clean_and_unchanged_on_cuda():
    plain = harness.run_loop(reference.train_loop, device="cuda", steps=20)
    with sanitize(report=False) as san:
        traced = harness.run_loop(reference.train_loop, device="cuda", steps=20)
    assert san.violations == [] and plain.losses == traced.losses and plain.scales == traced.scales
    out = measure_overhead(steps=20, repeats=1, device="cuda")
    assert out["plain_s"] > 0 and out["traced_s"] > 0
