"""Fixability is defined once (amplint.rules.Rule.fix_applicabilities) and is true: the
labels of `amplint rules`, `amplint rule`, README, docs/rules.md and SARIF all come from it,
and it matches the fixes each rule really produces on its own examples."""

from __future__ import annotations

import json

import pytest

from amplint.analyze import analyze_text
from amplint.rules import ALL_RULES
from amplint_testutil import run_amplint


@pytest.mark.parametrize("code", list(ALL_RULES))
def test_declared_applicabilities_are_the_ones_produced(code):
    rule = ALL_RULES[code]
    produced, unfixed = set(), 0
    for inv in rule.invalid:
        for d in analyze_text(inv.code, "example.py").diagnostics:
            if d.code != code:
                continue
            if d.fix is None:
                unfixed += 1
            else:
                produced.add(d.fix.applicability)
    assert tuple(sorted(produced)) == rule.fix_applicabilities
    if rule.fix_availability == "always":
        assert unfixed == 0


def test_every_surface_shows_the_same_label():
    data = {d["code"]: d for d in json.loads(run_amplint("rules", "--output-format", "json").stdout)}
    text = run_amplint("rules").stdout.splitlines()[1:]
    markdown = run_amplint("rules", "--output-format", "markdown").stdout.splitlines()[2:]
    for code, rule in ALL_RULES.items():
        assert data[code]["fix_label"] == rule.fix_label
        assert data[code]["fix"] == rule.fix_sentence
        row = next(line for line in text if line.startswith(code))
        assert f"  {rule.fix_label}  " in row
        md = next(line for line in markdown if line.startswith(f"| {code} "))
        assert md.split(" | ")[2] == rule.severity and md.split(" | ")[3] == rule.fix_label
        assert data[code]["severity"] == rule.severity
        assert row.split()[2] == rule.severity
        page = run_amplint("rule", code).stdout if code in ("AMP003", "AMP004", "AMP008", "AMP104") else None
        if page is not None:
            assert page.splitlines()[2] == rule.fix_sentence
            assert page.splitlines()[4].startswith(f"Severity: {rule.severity} (")


def test_sarif_rule_properties_carry_the_label(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nscaler = torch.amp.GradScaler('cuda')\n")
    r = run_amplint("check", "--no-cache", "--output-format", "sarif", "a.py", cwd=tmp_path)
    rules = {x["id"]: x for x in json.loads(r.stdout)["runs"][0]["tool"]["driver"]["rules"]}
    for code, rule in ALL_RULES.items():
        props = rules[code]["properties"]
        assert props["fixability"] == rule.fix_label
        assert props["fix_applicabilities"] == list(rule.fix_applicabilities)
        assert rule.fix_sentence in rules[code]["help"]["markdown"]
    assert rules["AMP104"]["properties"]["fixability"] == "display-only"
