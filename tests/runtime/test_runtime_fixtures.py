"""Runtime check of the rule fixtures: fixtures/<CODE>/after.py must pass, before.py must not.

For every ``fixtures/*/after.py`` each loop found by ``load_loops`` must pass ``check_all``
and match the reference loop (``compare_to_reference``). Each ``before.py`` sibling that holds
a loop must fail at least one harness check or produce at least one sanitizer violation; the
test reports which (``-rA`` / ``-s`` shows it, and it is attached as a user property).

Fixtures with only a ``before.py`` are run too. Files that hold no harness loop (they build
their own scaler, or none) are listed in ``NO_LOOP`` and asserted to have none, so nothing
passes by finding nothing to check; a file that cannot be imported here is in ``NEEDS``.
"""

from __future__ import annotations

import glob
import os

import pytest

import torch  # noqa: F401  (the `runtime` extra installs it: a broken install fails here, not skips)

from amplint.runtime import harness  # noqa: E402
from amplint.runtime.sanitizer import Sanitizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "fixtures")


# Fixture files without a harness loop (`load_loops` finds none): asserted to have none.
NO_LOOP = {
    "amp101_deprecated_amp_api/before.py",  # builds its own torch.cuda.amp scaler (a deprecation finding)
    "amp101_deprecated_amp_api/after.py",
    "amp201_fp16_autocast_without_scaler/before.py",  # no scaler at all (the harness always passes one)
    "amp201_fp16_autocast_without_scaler/after.py",
    "amp202_half_model_with_scaler/before.py",  # `fit` builds its model, optimizer and scaler
    "amp301_checkpoint_missing_scaler_state/before.py",  # checkpoint helpers, no training loop
}
# Fixture files that import a package this environment does not have.
NEEDS = {"amp104_apex_amp/before.py": "apex"}
# before.py files without an after.py: the harness check that fails and the error torch raises.
CAUGHT_BY = {
    "amp008_repeated_unscale_or_step": ("1_finishes", "unscale_() has already been called on this optimizer since the last update()"),
    "amp102_unknown_grad_scaler_attribute": ("1_finishes", "'GradScaler' object has no attribute 'check_overflow'"),
}
RUNS_CORRECTLY = {
    # AMP203 is an info rule: a GradScaler under bfloat16 autocast is unnecessary, not wrong.
    "amp203_scaler_with_bfloat16": "AMP203 (info): the loop runs correctly; no harness check and no sanitizer "
    "check catches an unneeded scaler, so fixtures/README.md's 'every before.py fails a named check' does not hold",
}


def _rel(path: str) -> str:
    return os.path.relpath(path, FIXTURES).replace(os.sep, "/")


def has_loops(path: str) -> bool:
    """Whether ``path`` holds harness loops; asserts the NO_LOOP and NEEDS lists are true."""
    rel = _rel(path)
    if rel in NEEDS:
        with pytest.raises(ModuleNotFoundError, match=NEEDS[rel]):
            harness.load_loops(path)
        return False
    loops = harness.load_loops(path)
    if rel in NO_LOOP:
        assert loops == [], f"{rel} now has a loop: take it out of NO_LOOP so that it is run"
        return False
    assert loops, f"{rel}: no harness loop found (if that is intended, list it in NO_LOOP)"
    return True


def fixture_dirs(root: str = FIXTURES) -> list[str]:
    return sorted(os.path.dirname(p) for p in glob.glob(os.path.join(root, "*", "after.py")))


def check_after(path: str) -> list[str]:
    """Problems with the loops of an after.py (empty list: all good, or no loop in it)."""
    problems = []
    for name, fn in harness.load_loops(path):
        rep = harness.check_all(fn, device="cpu", name=name)
        if not rep.ok:
            problems.append(str(rep))
        same, detail = harness.compare_to_reference(fn, device="cpu")
        if not same:
            problems.append(f"{name}: differs from the reference loop: {detail}")
    return problems


def check_before(path: str) -> list[tuple[str, list[str], list[str]]]:
    """For each loop of a before.py: (name, failed checks, sanitizer violations)."""
    out = []
    for name, fn in harness.load_loops(path):
        with Sanitizer(report=False) as san:
            rep = harness.check_all(fn, device="cpu", name=name)
        out.append((name, [f"{c.name}: {c.detail}" for c in rep.checks if c.passed is False],
                    [str(v) for v in san.violations]))
    return out


_DIRS = fixture_dirs()
_BEFORE_ONLY = sorted(d for d in glob.glob(os.path.join(FIXTURES, "amp*")) if not os.path.exists(os.path.join(d, "after.py")))


def _assert_caught(fixture: str, before: str, record_property) -> None:
    results = check_before(before)
    assert results
    summary = []
    for name, failed, violations in results:
        summary.append(f"{os.path.basename(fixture)}/{name}: failed checks={failed or 'none'}; "
                       f"sanitizer={violations or 'none'}")
        assert failed or violations, f"{before}: loop {name} passes every check and the sanitizer is silent"
    record_property("before_result", "\n".join(summary))
    print("\n".join(summary))
    named = CAUGHT_BY.get(os.path.basename(fixture))
    if named is not None:
        check, error = named
        assert any(f.startswith(check + ": ") and error in f for _n, failed, _v in results for f in failed), results


def test_every_rule_fixture_is_run_or_listed():
    dirs = sorted(glob.glob(os.path.join(FIXTURES, "amp*")))
    assert len(dirs) >= 17 and len(_DIRS) >= 11 and len(_BEFORE_ONLY) >= 6
    assert set(_DIRS) | set(_BEFORE_ONLY) == set(dirs)
    named = set(CAUGHT_BY) | set(RUNS_CORRECTLY) | {r.split("/")[0] for r in NO_LOOP} | {r.split("/")[0] for r in NEEDS}
    assert {os.path.basename(d) for d in _BEFORE_ONLY} <= named


@pytest.mark.parametrize("fixture", _DIRS, ids=[os.path.basename(d) for d in _DIRS])
def test_fixture_after_passes_and_before_is_caught(fixture, record_property):
    after = os.path.join(fixture, "after.py")
    if has_loops(after):
        problems = check_after(after)
        assert not problems, "\n".join(problems)
    before = os.path.join(fixture, "before.py")
    if has_loops(before):
        _assert_caught(fixture, before, record_property)


def _before_only_params():
    out = []
    for d in _BEFORE_ONLY:
        name = os.path.basename(d)
        marks = [pytest.mark.xfail(strict=True, reason=RUNS_CORRECTLY[name])] if name in RUNS_CORRECTLY else []
        out.append(pytest.param(d, id=name, marks=marks))
    return out


@pytest.mark.parametrize("fixture", _before_only_params())
def test_before_only_fixture_is_caught(fixture, record_property):
    """A before.py without an after.py: its loops fail a named check or raise (or it is
    asserted to hold no loop, or to need a package this environment lacks)."""
    before = os.path.join(fixture, "before.py")
    if has_loops(before):
        _assert_caught(fixture, before, record_property)


def test_fixture_checker_on_a_synthetic_tree(tmp_path):
    """The checker logic itself, on a made-up fixture (so it is tested before fixtures exist)."""
    d = tmp_path / "AMP999"
    d.mkdir()
    body = (
        "import torch\n\n"
        "def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):\n"
        "    losses = []\n"
        "    for x, y in batches:\n"
        "        optimizer.zero_grad(set_to_none=True)\n"
        "        with torch.autocast(device_type, dtype=dtype):\n"
        "            loss = loss_fn(model(x), y)\n"
        "{BW}"
        "        scaler.step(optimizer)\n"
        "        scaler.update()\n"
        "        losses.append(loss.item())\n"
        "    return losses\n"
    )
    (d / "after.py").write_text(body.replace("{BW}", "        scaler.scale(loss).backward()\n"))
    (d / "before.py").write_text(body.replace("{BW}", "            scaler.scale(loss).backward()\n"))
    # before: backward inside autocast -> harness passes, sanitizer flags AMP002 at line 9
    assert fixture_dirs(str(tmp_path)) == [str(d)]
    assert check_after(str(d / "after.py")) == []
    [(name, failed, violations)] = check_before(str(d / "before.py"))
    assert name.endswith("before.py:train_loop") and failed == []
    assert len(violations) == 1 and f"{d / 'before.py'}:9: AMP002" in violations[0]
