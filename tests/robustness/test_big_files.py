"""Big files: LibCST sees only the top-level statements a fix touches (fixer.apply_fixes'
windows), so a 50,000-line file is fixed in seconds; the result must be exactly what fixing
the whole module gives."""

from __future__ import annotations

import ast

import pytest

from amplint.fix import apply as fixer
from amplint.analyze import analyze_text
from amplint.fix.apply import edits_for, fix_text
from amplint.rules import ALL_RULES
from robustness_util import FIXED, FLAGGED, FLAGGED_ROW, run

PAD = "".join(f"_pad_{i} = {i}  # filler\n" for i in range(fixer.WINDOW_MIN_LINES + 10))
EXAMPLES = [
    (code, i, inv)
    for code, r in ALL_RULES.items()
    for i, inv in enumerate(r.invalid)
    if inv.fixed is not None and "__future__" not in inv.code
]


def _want(code, unsafe):
    def want(d, lines):
        return d.code == code and d.fix is not None and (d.fix.applicability == "safe" or (unsafe and d.fix.applicability == "unsafe"))

    return want


@pytest.mark.parametrize("code,i,inv", EXAMPLES, ids=[f"{c}-{i}" for c, i, _ in EXAMPLES])
def test_windowed_fix_matches_whole_module_fix(code, i, inv):
    """The filler above shifts every row of the example: the windows must shift them back."""
    src = PAD + inv.code
    expected = PAD + inv.fixed
    fixed, n, converged = fix_text(src, "big.py", _want(code, inv.unsafe))
    assert fixed == expected
    assert n >= 1 and converged


def test_windowed_edits_match_whole_module_edits():
    src = PAD + FLAGGED
    d = next(d for d in analyze_text(src, "big.py").diagnostics if d.code == "AMP001")
    row = len(PAD.splitlines()) + FLAGGED_ROW + 1
    assert edits_for(src, d.fix) == [
        {"content": "    scaler.update()\n", "location": {"row": row, "column": 1}, "end_location": {"row": row, "column": 1}}
    ]


def test_fix_of_a_big_file_through_the_cli(tmp_path):
    big = "".join(f"x{i} = {i}\n" for i in range(6_000))  # 12,000 lines: windowed (the 50k-line check is in test_hostile_inputs)
    f = tmp_path / "big.py"
    f.write_text(big + FLAGGED + big)
    p = run("fix", "big.py", "--no-cache", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f.read_text() == big + FIXED + big
    ast.parse(f.read_text())
