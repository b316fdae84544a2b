"""One severity per finding, the same in every output format: AMP101 (a deprecation) and AMP002
are warnings, AMP001 (breaks training) is an error; ``--warnings-as-errors`` (and the
``warnings-as-errors`` setting) reports every warning as an error everywhere."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from amplint_testutil import run_amplint

TRAIN = """\
import torch


def train(model, loader, optimizer):
    scaler = torch.cuda.amp.GradScaler()
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = model(x, y)
            scaler.scale(loss).backward()
        scaler.step(optimizer)
"""


def _severities(fmt: str, out: str) -> dict[str, str]:
    """code -> severity as the format writes it (normalised to error / warning)."""
    if fmt == "concise":
        return {line.split()[1]: "warning" if " [warning]" in line else "error" for line in out.splitlines() if ": AMP" in line}
    if fmt == "github":
        return {line.split("amplint (")[1].split(")")[0]: line[2:].split()[0] for line in out.splitlines() if line.startswith("::")}
    if fmt == "gitlab":
        return {d["check_name"]: {"major": "error", "minor": "warning"}[d["severity"]] for d in json.loads(out)}
    if fmt == "json":
        return {d["code"]: d["severity"] for d in json.loads(out)}
    if fmt == "junit":
        root = ET.fromstring(out.split("\n", 1)[1])
        got = {}
        for case in root.iter("testcase"):
            sev = case.find("properties/property[@name='severity']").get("value")
            failure = case.find("failure")
            assert failure.text.split(", ", 2)[2].startswith("[warning] ") == (sev == "warning")
            got[case.get("name").rsplit(".", 1)[1]] = sev
        return got
    if fmt == "sarif":
        run = json.loads(out)["runs"][0]
        return {r["ruleId"]: r["level"] for r in run["results"]}
    raise AssertionError(fmt)


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


@pytest.mark.parametrize("fmt", ["concise", "github", "gitlab", "json", "junit", "sarif"])
def test_warnings_and_errors_in_every_format(proj, fmt):
    r = run_amplint("check", "--no-cache", "--output-format", fmt, "train.py", cwd=proj)
    assert r.returncode == 1, r.stderr
    assert _severities(fmt, r.stdout) == {"AMP101": "warning", "AMP002": "warning", "AMP001": "error"}
    r = run_amplint("check", "--no-cache", "--warnings-as-errors", "--output-format", fmt, "train.py", cwd=proj)
    assert r.returncode == 1, r.stderr
    assert _severities(fmt, r.stdout) == {"AMP101": "error", "AMP002": "error", "AMP001": "error"}


def test_warnings_as_errors_setting_equals_the_flag(proj):
    (proj / "pyproject.toml").write_text("[tool.amplint]\nwarnings-as-errors = true\n")
    r = run_amplint("check", "--no-cache", "--output-format", "junit", "train.py", cwd=proj)
    assert _severities("junit", r.stdout) == {"AMP101": "error", "AMP002": "error", "AMP001": "error"}


def test_exit_zero_is_unchanged_by_severity(proj):
    r = run_amplint("check", "--no-cache", "--exit-zero", "--warnings-as-errors", "train.py", cwd=proj)
    assert r.returncode == 0 and "Found 3 errors." in r.stdout
