"""Every rule's own valid/invalid examples (Fixit's habit), and their fixes."""

from __future__ import annotations

import ast
import textwrap

import pytest

from amplint.analyze import analyze_text
from amplint.fix.apply import fix_text
from amplint.rules import ALL_RULES
from amplint.screen import may_contain_amp
from amplint_testutil import screen_variants

VALID = [(code, i, src) for code, r in ALL_RULES.items() for i, src in enumerate(r.valid)]
INVALID = [(code, i, inv) for code, r in ALL_RULES.items() for i, inv in enumerate(r.invalid)]


def _codes(src: str, code: str):
    # only the rule under test runs (rules are independent of each other): each example test
    # then runs one rule's code, which keeps the mutation sample's per-mutant test set small
    result = analyze_text(src, "example.py", rules={code: ALL_RULES[code]})
    assert not result.errors, result.errors
    return [d for d in result.diagnostics if d.code == code]


def test_every_rule_runs_cleanly_on_every_example():
    """All rules together on every example: no rule fails (E999/AMP900) on another's example,
    and each example's own findings are the same as with its rule alone."""
    for code, i, src in VALID + [(c, i, inv.code) for c, i, inv in INVALID]:
        result = analyze_text(src, "example.py")
        assert not result.errors, (code, i, result.errors)
        assert [d for d in result.diagnostics if d.code == code] == _codes(src, code), (code, i)


@pytest.mark.parametrize("code,i,src", VALID, ids=[f"{c}-valid-{i}" for c, i, _ in VALID])
def test_valid_examples_are_clean(code, i, src):
    assert _codes(src, code) == []


@pytest.mark.parametrize("code,i,inv", INVALID, ids=[f"{c}-invalid-{i}" for c, i, _ in INVALID])
def test_invalid_examples_are_flagged(code, i, inv):
    found = _codes(inv.code, code)
    assert len(found) == inv.count, [(d.row, d.message) for d in found]


def _want(code, unsafe):
    def want(d, lines):
        return d.code == code and d.fix is not None and (
            d.fix.applicability == "safe" or (unsafe and d.fix.applicability == "unsafe")
        )

    return want


@pytest.mark.parametrize("code,i,inv", INVALID, ids=[f"{c}-fix-{i}" for c, i, _ in INVALID])
def test_fix_gives_expected_source_and_is_idempotent(code, i, inv, monkeypatch):
    # only the rule under test runs (as in _codes): `want` fixes its findings only, so the other
    # rules' findings cannot change the result; this keeps each test to one rule's code
    import amplint.rules

    monkeypatch.setattr(amplint.rules, "ALL_RULES", {code: ALL_RULES[code]})
    want = _want(code, inv.unsafe)
    fixed, n, converged = fix_text(inv.code, "example.py", want)
    expected = inv.fixed if inv.fixed is not None else inv.code
    assert fixed == expected
    assert converged
    ast.parse(fixed)
    if inv.fixed is not None:
        assert n >= 1
        assert _codes(fixed, code) == [], "re-check still finds the fixed code"
        if not inv.unsafe:
            # a safe fix is applied without --unsafe-fixes; an unsafe one is not
            assert fix_text(inv.code, "example.py", _want(code, False))[0] == expected
        else:
            assert fix_text(inv.code, "example.py", _want(code, False))[0] == inv.code
    again, n2, _ = fix_text(fixed, "example.py", want)
    assert again == fixed and n2 == 0


@pytest.mark.parametrize("code,i,inv", INVALID, ids=[f"{c}-screen-{i}" for c, i, _ in INVALID])
def test_invalid_examples_pass_the_prescreen(code, i, inv):
    """The screen must never hide code a rule reports."""
    assert may_contain_amp(inv.code.encode())


EXAMPLES = [(f"{c}-valid-{i}", src) for c, i, src in VALID] + [(f"{c}-invalid-{i}", inv.code) for c, i, inv in INVALID]


@pytest.mark.parametrize("name,src", EXAMPLES, ids=[f"{n}-screened" for n, _ in EXAMPLES])
def test_screen_skips_only_code_without_findings(name, src):
    """What the screen skips has no finding of any rule when analysed anyway. Almost every
    example passes the screen, so the claim is tested on variants of each example with all
    but at most two screen tokens renamed (amplint_testutil.screen_variants)."""
    variants = [("original", src), *screen_variants(src)]
    rejected = [(label, v) for label, v in variants if not may_contain_amp(v.encode())]
    assert rejected, "renaming every screen token must get the example rejected"
    for label, v in rejected:
        found = analyze_text(v, "example.py").diagnostics
        assert found == [], (label, [(d.code, d.row) for d in found])


@pytest.mark.parametrize("code", list(ALL_RULES))
def test_rule_has_docs_and_examples(code):
    rule = ALL_RULES[code]
    docs = textwrap.dedent(rule.docs)
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:"):
        assert section in docs, section
    if rule.fix_availability != "never":
        assert "## Fix safety" in docs
    assert rule.valid and rule.invalid
    assert rule.name == rule.name.lower() and " " not in rule.name
