"""docs/rules.md is generated from the rule modules and must be kept in sync."""

from __future__ import annotations

import os
import subprocess
import sys

from amplint.docs import all_rules_markdown, rules_table
from amplint.rules import ALL_RULES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_committed_rules_md_matches_the_generator():
    with open(os.path.join(REPO, "docs", "rules.md"), encoding="utf-8") as fh:
        committed = fh.read()
    assert committed == all_rules_markdown(), "docs/rules.md is stale: run `python -m amplint.docs > docs/rules.md`"


def test_module_entry_point_prints_the_same_markdown():
    out = subprocess.run(
        [sys.executable, "-m", "amplint.docs"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out == all_rules_markdown()


def test_every_rule_has_a_page_an_anchor_and_a_table_row():
    md = all_rules_markdown()
    table = rules_table(markdown=True)
    for code, rule in ALL_RULES.items():
        assert f'<a id="{code.lower()}-{rule.name}"></a>' in md
        assert f"## {rule.name} ({code})" in md
        assert f"| {code} | `{rule.name}` |" in table
        assert rule.url.endswith(f"#{code.lower()}-{rule.name}")
