"""CI output formats: sarif (validated against the official OASIS schema), github, gitlab,
junit, json-lines, and --output-file."""
import json
import os
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from integ_util import HERE, MISUSE, run_amplint

SCHEMA = os.path.join(HERE, "sarif-schema-2.1.0.json")  # OASIS SARIF 2.1.0 errata01 (sarif-spec repo)
EVIDENCE = os.environ.get("AMPLINT_EVIDENCE_DIR")

# AMP001 (safe fix), plus a file that does not parse (E999)
TWO_FINDINGS = MISUSE.replace("scaler.step(optimizer)", "scaler.step(optimizer)\n    optimizer.step()")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(MISUSE)
    (tmp_path / "pkg dir").mkdir()
    (tmp_path / "pkg dir" / "loop.py").write_text(MISUSE)
    (tmp_path / "broken.py").write_text("import torch\nscaler = torch.amp.GradScaler(\ndef\n")
    return tmp_path


def _check(cwd, *args):
    return run_amplint("check", "--no-cache", *args, cwd=cwd)


def test_sarif_validates_against_the_official_schema(project):
    p = _check(project, "--output-format", "sarif", ".")
    assert p.returncode == 1, p.stderr
    log = json.loads(p.stdout)
    with open(SCHEMA) as fh:
        schema = json.load(fh)
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator(schema).validate(log)
    if EVIDENCE:
        os.makedirs(EVIDENCE, exist_ok=True)
        with open(os.path.join(EVIDENCE, "amplint.sarif"), "w") as fh:
            fh.write(p.stdout)
        with open(os.path.join(EVIDENCE, "sarif-validation.txt"), "w") as fh:
            fh.write(f"jsonschema {jsonschema.__version__ if hasattr(jsonschema, '__version__') else ''} Draft4Validator: "
                     f"amplint.sarif is valid against {os.path.basename(SCHEMA)} ({schema.get('id')})\n")

    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    driver = run["tool"]["driver"]
    assert driver["name"] == "amplint"
    rules = {r["id"]: r for r in driver["rules"]}
    amp001 = rules["AMP001"]
    assert amp001["name"] == "missing-scaler-update"
    assert amp001["helpUri"].startswith("https://") and "amp001" in amp001["helpUri"]
    assert "## What it does" in amp001["help"]["markdown"] and amp001["help"]["text"]
    assert amp001["shortDescription"]["text"]

    results = run["results"]
    by_uri = {}
    for r in results:
        loc = r["locations"][0]["physicalLocation"]
        by_uri.setdefault(loc["artifactLocation"]["uri"], []).append(r)
    assert set(by_uri) == {"train.py", "pkg%20dir/loop.py", "broken.py"}
    r = by_uri["train.py"][0]
    assert r["ruleId"] == "AMP001" and driver["rules"][r["ruleIndex"]]["id"] == "AMP001"
    region = r["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (8, 5)  # 1-based, like `check`
    # the safe fix travels as a SARIF fix: insert `scaler.update()` before line 9
    (fix,) = r["fixes"]
    (change,) = fix["artifactChanges"]
    (rep,) = change["replacements"]
    assert rep["deletedRegion"]["startLine"] == 9
    assert rep["insertedContent"]["text"] == "    scaler.update()\n"
    assert by_uri["broken.py"][0]["ruleId"] == "E999"
    assert "ruleIndex" not in by_uri["broken.py"][0]
    # levels: every result, and every rule's defaultConfiguration (the schema allows any level)
    assert len(results) == 3
    assert [r["level"] for r in results] == ["error"] * 3
    from amplint.rules import ALL_RULES

    for rule in driver["rules"]:  # each rule's own severity (AMP101, AMP002, ... are warnings)
        assert rule["defaultConfiguration"]["level"] == ALL_RULES[rule["id"]].severity, rule["id"]
    assert {r["defaultConfiguration"]["level"] for r in driver["rules"]} == {"error", "warning"}

    assert {r["id"]: r["defaultConfiguration"]["enabled"] for r in driver["rules"]} == {
        c: rule.default and not rule.preview for c, rule in ALL_RULES.items()}


def test_sarif_with_no_findings_is_valid(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    p = _check(tmp_path, "--output-format", "sarif", "ok.py")
    assert p.returncode == 0
    log = json.loads(p.stdout)
    with open(SCHEMA) as fh:
        jsonschema.Draft4Validator(json.load(fh)).validate(log)
    assert log["runs"][0]["results"] == []
    assert {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]} >= {"AMP001", "AMP002", "AMP003", "AMP004"}


def test_github_annotations(project):
    p = _check(project, "--output-format", "github", "train.py")
    assert p.returncode == 1
    (line,) = p.stdout.splitlines()
    assert line.startswith("::error title=amplint (AMP001),file=train.py,line=8,col=5,endLine=8,endColumn=27::")
    assert line.endswith("the next step raises \"step() has already been called since the last update()\"")
    assert "::train.py:8:5: AMP001 " in line


def test_gitlab_code_quality_fingerprints_survive_moving_code(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(MISUSE)
    first = json.loads(_check(tmp_path, "--output-format", "gitlab", "train.py").stdout)
    (issue,) = first
    assert issue["check_name"] == "AMP001"
    assert issue["severity"] == "major"
    assert issue["location"]["path"] == "train.py"
    assert issue["location"]["positions"]["begin"] == {"line": 8, "column": 5}
    assert issue["description"].startswith("AMP001: ")
    assert len(issue["fingerprint"]) == 64

    # add lines above: the row changes, the fingerprint does not
    f.write_text("# a comment\n\n\n" + MISUSE)
    (moved,) = json.loads(_check(tmp_path, "--output-format", "gitlab", "train.py").stdout)
    assert moved["location"]["positions"]["begin"]["line"] == 11
    assert moved["fingerprint"] == issue["fingerprint"]

    # the same finding in another file has another fingerprint
    (tmp_path / "other.py").write_text(MISUSE)
    issues = json.loads(_check(tmp_path, "--output-format", "gitlab", "train.py", "other.py").stdout)
    assert len({i["fingerprint"] for i in issues}) == 2


def test_gitlab_fingerprints_are_unique_for_identical_lines():
    from amplint.report.gitlab import format_gitlab
    from amplint.report import Message, Summary

    ms = [Message("a.py", "AMP001", "m", row, 4, row, 10, source_line="    scaler.step(opt)\n") for row in (5, 9)]
    out = json.loads(format_gitlab(ms, Summary()))
    assert len({i["fingerprint"] for i in out}) == 2


def test_junit_xml(project):
    p = _check(project, "--output-format", "junit", "train.py", "broken.py")
    assert p.returncode == 1
    root = ET.fromstring(p.stdout)
    assert root.tag == "testsuites" and root.get("failures") == "2"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"train.py", "broken.py"}
    (case,) = suites["train.py"].findall("testcase")
    assert case.get("name") == "org.amplint.AMP001" and case.get("line") == "8" and case.get("column") == "5"
    failure = case.find("failure")
    assert failure.get("type") == "AMP001" and "scaler.update()" in failure.get("message")


def test_junit_without_findings(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    p = _check(tmp_path, "--output-format", "junit", "ok.py")
    assert p.returncode == 0
    root = ET.fromstring(p.stdout)
    assert root.get("failures") == "0" and root.find("testsuite/testcase") is not None


def test_json_lines(project):
    p = _check(project, "--output-format", "json-lines", "train.py", "broken.py")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["code"] for r in rows] == ["E999", "AMP001"]
    assert rows[1]["location"] == {"row": 8, "column": 5} and rows[1]["cell"] is None
    assert rows[1]["fix"]["applicability"] == "safe"


@pytest.mark.parametrize("fmt", ["sarif", "gitlab", "junit", "json", "concise"])
def test_output_file(project, fmt):
    out = project / "reports" / f"amplint.{fmt}"
    p = _check(project, "--output-format", fmt, "-o", str(out), "train.py")
    assert p.returncode == 1
    assert p.stdout == ""
    text = out.read_text()
    assert "AMP001" in text
    if fmt in ("sarif", "gitlab", "json"):
        json.loads(text)


def test_output_format_from_environment(project):
    p = run_amplint("check", "--no-cache", "train.py", cwd=project, env={"AMPLINT_OUTPUT_FORMAT": "gitlab"})
    assert json.loads(p.stdout)[0]["check_name"] == "AMP001"


def test_the_schema_rejects_what_sarif_forbids(project):
    """The validation above can fail: an unknown property or a 0 line is rejected."""
    log = json.loads(_check(project, "--output-format", "sarif", "train.py").stdout)
    with open(SCHEMA) as fh:
        validator = jsonschema.Draft4Validator(json.load(fh))
    bad = json.loads(json.dumps(log))
    bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert not validator.is_valid(bad)
    bad = json.loads(json.dumps(log))
    bad["runs"][0]["results"][0]["column"] = 5
    assert not validator.is_valid(bad)
