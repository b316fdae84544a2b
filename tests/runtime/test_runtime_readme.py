"""The runtime example (once the README's, now the "Runtime checks" section at the end of
docs/verify.md) stays true: its script is user_scripts/readme_train.py, and what it shows
verify and trace printing is what they print."""

from __future__ import annotations

import os
import re
import shutil

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import trace, verify  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "user_scripts", "readme_train.py")


def _section() -> str:
    with open(os.path.join(REPO, "docs", "verify.md"), encoding="utf-8") as fh:
        text = fh.read()
    m = re.search(r"^## Runtime checks[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, "docs/verify.md lost its Runtime checks section"
    return m.group(1)


def _block(section: str, start: str) -> list[str]:
    m = re.search(r"```text\n\$ " + re.escape(start) + r"\n(.*?)\n```", section, re.S)
    assert m, start
    return m.group(1).splitlines()


def _normalise(line: str) -> str:
    """Numbers a different CPU may round differently, and pids."""
    line = re.sub(r"pid \d+", "pid N", line)
    return re.sub(r"(rel=|pass |FAIL )\d[\d.e-]*(/[\d.e-]+)?", r"\1#", line).rstrip()


def test_readme_script_is_the_tested_one():
    with open(SCRIPT, encoding="utf-8") as fh:
        script = fh.read()
    assert f"```python\n{script}```" in _section()


def test_readme_verify_output(tmp_path, monkeypatch):
    shutil.copy(SCRIPT, tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    rows, code = verify.verify(["train.py"], device="cpu")
    assert code == 0
    shown = _block(_section(), "amplint verify train.py")
    got = verify.format_table(rows).splitlines()
    if not any(x.startswith("  data: ") for x in shown):  # README predates issue 32's fitted-data line
        assert [x for x in got if x.startswith("  data: ")] == [
            "  data: inputs float32 (64, 8); float targets (64, 1), model output (64, 1); "
            "loss_fn <- mse_loss (from mse_loss (line 14))"]
        got = [x for x in got if not x.startswith("  data: ")]
    assert [_normalise(x) for x in got] == [_normalise(x) for x in shown]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the README shows a machine without CUDA")
def test_readme_trace_summary(tmp_path, monkeypatch, capfd):
    shutil.copy(SCRIPT, tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    assert trace.main(["--", "python", "train.py", "--epochs", "1"]) == 0
    err = capfd.readouterr().err
    got = [_normalise(x) for x in err.splitlines() if x.startswith(("amplint trace", "  "))]
    got = [x for x in got if not x.startswith("  scaler = ")]  # the source line under torch's warning
    assert got == [_normalise(x) for x in _block(_section(), "amplint trace -- python train.py --epochs 1")]
