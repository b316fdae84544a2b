"""Runtime check of the rule fixtures: fixtures/<CODE>/after.py must pass, before.py must not.

For every ``fixtures/*/after.py`` each function ``amplint verify`` would run (``load_loops``:
definitions only, parameters mapped by role) must pass ``check_all`` and match the reference
loop configured like it (``compare_to_reference``). Each ``before.py`` sibling that holds a loop
must fail at least one harness check or produce at least one sanitizer violation, except for
the rules a run cannot see (a deprecated but working API, a bf16 scaler that is merely
unneeded, a checkpoint without scaler state): there the loop must pass, which documents that
only the static check finds them. The test reports what it saw (``-rA`` / ``-s`` shows it, and
it is attached as a user property). Skipped cleanly while no fixture exists.
"""

from __future__ import annotations

import glob
import os

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import harness  # noqa: E402
from amplint.runtime.sanitizer import Sanitizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "fixtures")


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
# correct at run time; only the static rule sees the problem
RUNTIME_INVISIBLE = {"amp101_deprecated_amp_api", "amp203_scaler_with_bfloat16",
                     "amp301_checkpoint_missing_scaler_state"}


@pytest.mark.skipif(not _DIRS, reason="no fixtures/*/after.py yet")
@pytest.mark.parametrize("fixture", _DIRS, ids=[os.path.basename(d) for d in _DIRS])
def test_fixture_after_passes_and_before_is_caught(fixture, record_property):
    after = os.path.join(fixture, "after.py")
    problems = check_after(after)
    assert not problems, "\n".join(problems)
    before = os.path.join(fixture, "before.py")
    if not os.path.exists(before):
        return
    results = check_before(before)
    summary = []
    for name, failed, violations in results:
        summary.append(f"{os.path.basename(fixture)}/{name}: failed checks={failed or 'none'}; "
                       f"sanitizer={violations or 'none'}")
        if os.path.basename(fixture) in RUNTIME_INVISIBLE:
            assert not failed and not violations, (before, failed, violations)
        else:
            assert failed or violations, f"{before}: loop {name} passes every check and the sanitizer is silent"
    record_property("before_result", "\n".join(summary))
    print("\n".join(summary))


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
