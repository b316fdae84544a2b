"""amplint.rule_table (what the check path reads without importing the rules) says exactly
what the rule modules declare."""

from __future__ import annotations

import subprocess
import sys

from amplint.rule_table import RULES, severity_of
from amplint.rules import ALL_RULES


def test_table_matches_every_rule():
    assert list(RULES) == list(ALL_RULES)
    for code, rule in ALL_RULES.items():
        info = RULES[code]
        assert (info.name, info.severity, info.default, info.preview) == (rule.name, rule.severity, rule.default, rule.preview), code
        assert info.url == rule.url


def test_severity_of_reads_the_table():
    assert severity_of("AMP101") == "warning" and severity_of("AMP001") == "error"
    assert severity_of("AMP101", warnings_as_errors=True) == "error"
    assert severity_of("E999") == "error" and severity_of("XYZ1") == "error"


def test_a_warm_cache_run_imports_no_rule_and_no_model(tmp_path):
    """The second check of an unchanged file reports from the cache: neither the rules nor the
    model (nor libcst) are imported."""
    (tmp_path / "train.py").write_text("import torch\nscaler = torch.amp.GradScaler()\nscaler.step(opt)\n")
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['amplint', 'check', 'train.py']\n"
        "try:\n    runpy.run_module('amplint', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('amplint.rules', 'amplint.model.builder', 'amplint.analyze', 'libcst'))), file=sys.stderr)\n"
    )
    first = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert "AMP001" in first.stdout and "amplint.rules" in first.stderr  # analysed: the rules ran
    second = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert "AMP001" in second.stdout
    assert second.stderr.strip().splitlines()[-1] == "[]"


def test_checking_one_file_imports_none_of_the_costly_stdlib_modules(tmp_path):
    """A check that analyses one file (no cache) imports neither ``typing``, ``traceback`` nor
    ``threading`` (each costs milliseconds of a one-file run whose whole budget is a few times
    the interpreter's start-up), and compiles only the regexes it uses."""
    (tmp_path / "train.py").write_text(
        "import torch\nscaler = torch.amp.GradScaler()\nfor x in loader:\n"
        "    with torch.autocast('cuda'):\n        loss = model(x)\n    scaler.scale(loss).backward()\n"
        "    scaler.step(opt)\n"
    )
    probe = (
        "import sys\n"
        "sys.argv = ['amplint', 'check', '--no-cache', 'train.py']\n"
        "from amplint.cli import main\n"
        "try:\n    main()\n"
        "except SystemExit:\n    pass\n"
        "from amplint import lazyre\n"
        "pats = [v for m in list(sys.modules.values()) if (m.__name__ or '').startswith('amplint') for v in vars(m).values() if isinstance(v, lazyre.lazy)]\n"
        "print(sorted(m for m in ('typing', 'traceback', 'threading') if m in sys.modules), file=sys.stderr)\n"
        "print(sum('search' in vars(p) for p in pats), len(pats), file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert "AMP001" in run.stdout, run.stderr
    imported, counts = run.stderr.strip().splitlines()[-2:]
    assert imported == "[]"
    compiled, total = map(int, counts.split())
    assert total >= 30 and compiled < total / 2  # most of the module-level patterns stay uncompiled
