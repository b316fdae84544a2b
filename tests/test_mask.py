"""Masking irrelevant top-level definitions before parsing (amplint.parse) must never change
a finding: every fixture and rule example is analysed both ways."""

from __future__ import annotations

import ast
import glob
import os
import textwrap

import pytest

import amplint.analyze as engine
from amplint.parse import masked_source, parse_masked
from amplint.rules import ALL_RULES
from amplint_testutil import FIXTURES

SOURCES = [
    *[(f"{c}-valid-{i}", src) for c, r in ALL_RULES.items() for i, src in enumerate(r.valid)],
    *[(f"{c}-invalid-{i}", inv.code) for c, r in ALL_RULES.items() for i, inv in enumerate(r.invalid)],
]
for _p in sorted(glob.glob(os.path.join(FIXTURES, "**", "*.py"), recursive=True)):
    with open(_p, encoding="utf-8") as _fh:
        SOURCES.append((os.path.relpath(_p, FIXTURES), _fh.read()))

PADDING = "\n\n".join(f"def unrelated_{i}(x):\n    return x * {i}\n" for i in range(5))


def findings(src: str, mask: bool, monkeypatch) -> list:
    monkeypatch.setattr(engine, "MASK", mask)
    r = engine.analyze_text(src, "t.py")
    return [(d.code, d.row, d.col, d.message, d.fix) for d in r.diagnostics] + [(e.code, e.row) for e in r.errors]


@pytest.mark.parametrize("name,src", SOURCES, ids=[n for n, _ in SOURCES])
def test_masking_changes_no_finding(name, src, monkeypatch):
    # force masking on small sources by appending unrelated definitions (rows unchanged)
    padded = src + "\n\n" + PADDING
    monkeypatch.setattr("amplint.parse.MIN_LINES", 0)
    assert findings(padded, True, monkeypatch) == findings(padded, False, monkeypatch)


def test_masks_only_irrelevant_definitions():
    src = textwrap.dedent(
        """\
        import torch

        def model_code(x):
            return x + 1

        @decorator
        def train(loader, scaler):
            for x in loader:
                scaler.step(opt)

        class Net:
            def forward(self, x):
                return x

        def step_helper(loss, opt, gs):
            gs.update()

        def loop(gs):
            step_helper(1, 2, gs)
        scaler = torch.amp.GradScaler("cuda")
        loop(scaler)
        """
    )
    m = masked_source(src, force=True)
    kept = [ln for ln in m.text.split("\n") if ln.strip()]
    assert "def model_code(x):" not in kept and "class Net:" not in kept
    assert "def train(loader, scaler):" in kept and "@decorator" in kept
    # called from kept code: kept (it may receive the scaler under another name)
    assert "def loop(gs):" in kept and "def step_helper(loss, opt, gs):" in kept
    assert len(m.text.split("\n")) == len(src.split("\n"))


def test_def_line_inside_a_string_falls_back_to_the_full_parse(monkeypatch):
    src = textwrap.dedent(
        '''\
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def train(scaler, loader):
            """Example:
        def helper():
            pass
            """
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(opt)

        def other():
            return 1
        '''
    )
    # the line scan is misled: it takes the `def helper():` inside the docstring for a kept
    # definition (row 5) and masks `other` ...
    m = masked_source(src, force=True)
    assert m is not None and m.kept_defs == [3, 5]
    assert "def other" not in m.text
    # ... so parse_masked must refuse its tree (row 5 is no definition in it) ...
    assert parse_masked(src, "t.py", force=True) is None
    # ... and the engine parses the full text: the same findings as without masking
    monkeypatch.setattr("amplint.parse.MIN_LINES", 0)
    masked = findings(src, True, monkeypatch)
    assert masked == findings(src, False, monkeypatch)
    assert [f[:3] for f in masked] == [("AMP001", 10, 8)]


def test_crlf_and_aliases_are_not_masked():
    assert masked_source("def f():\r\n    pass\r\n", force=True) is None
    assert masked_source("import torch\nGS = torch.cuda.amp.GradScaler\ndef f():\n    pass\n", force=True) is None


def test_amp_helpers_are_the_top_level_functions_that_hand_out_amp_objects():
    """Their callers are kept by the masking: a function returning an autocast context or a
    GradScaler, or a @contextmanager entering autocast; not a method, not a function that
    only uses autocast itself."""
    from amplint.parse import amp_helpers

    src = (
        "import torch\nfrom contextlib import contextmanager\n\n"
        "def amp_ctx():\n    return torch.autocast('cuda', dtype=torch.float16)\n\n"
        "def make():\n    x = 1\n    return torch.amp.GradScaler('cuda')\n\n"
        "@contextmanager\ndef mixed():\n    with torch.autocast('cuda'):\n        yield\n\n"
        "def train():\n    with torch.autocast('cuda'):\n        pass\n    return 1\n\n"
        "class A:\n    def m(self):\n        return torch.autocast('cuda')\n"
    )
    assert amp_helpers(src) == {"amp_ctx", "make", "mixed"}
    assert amp_helpers("def f():\n    return 1\n") == set()
