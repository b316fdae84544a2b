"""README stays true: its rule table is `amplint rules`, its commands are the CI's."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as fh:
        return fh.read()


def test_rules_table_matches_amplint_rules():
    m = re.search(r"<!-- rules-table:start[^>]*-->\n(.*?)\n<!-- rules-table:end -->", _readme(), re.S)
    assert m, "README lost its rules table markers"
    out = subprocess.run([sys.executable, "-m", "amplint", "rules", "--output-format", "markdown"], capture_output=True, text=True)
    assert out.returncode == 0
    assert m.group(1).strip() == out.stdout.strip()


def test_ci_runs_the_readme_test_command():
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as fh:
        ci = fh.read()
    blocks = re.findall(r"```sh\n(.*?)\n```", _readme(), re.S)
    test_cmd = next(b for b in blocks if "pytest" in b)
    assert test_cmd.strip() in ci


def test_readme_stays_short_and_its_links_exist():
    text = _readme()
    assert len(text.splitlines()) <= 260  # issue 33: ~250 lines, the long material lives in docs/
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert "docs/project-mode.md" in links and "docs/verify.md" in links and "benchmarks/README.md" in links
    for link in links:
        assert os.path.exists(os.path.join(REPO, link)), link
