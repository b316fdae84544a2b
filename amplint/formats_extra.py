"""CI output formats: SARIF 2.1.0, GitLab Code Quality and JUnit XML.

Each formatter has the signature of ``amplint.report.FORMATTERS``:
``(messages: list[Message], summary: Summary) -> str``. ``checker._formatter`` finds them
here, so importing this module costs nothing on the default (``full``) path.
"""

from __future__ import annotations

import hashlib
import json
import os
from urllib.parse import quote

from amplint import __version__
from amplint.report import Message, Summary

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/amplint/amplint"
SRCROOT = "%SRCROOT%"


def _rel(path: str) -> str:
    """``path`` relative to the working directory (CI runs from the repository root), posix style."""
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive (Windows)
            return path.replace(os.sep, "/")
        if not rel.startswith(".."):
            path = rel
    return path.replace(os.sep, "/")


def _uri(path: str) -> tuple[str, str | None]:
    """(uri, uriBaseId) for a SARIF artifactLocation."""
    rel = _rel(path)
    if os.path.isabs(rel):
        return "file://" + quote(rel if rel.startswith("/") else "/" + rel), None
    if rel.startswith("./"):
        rel = rel[2:]
    return quote(rel), SRCROOT


# ---------------------------------------------------------------------------------- SARIF


def _sarif_rules():
    from amplint.docs import rule_json
    from amplint.rules import ALL_RULES

    rules = []
    for code, rule in ALL_RULES.items():
        info = rule_json(rule)
        explanation = info["explanation"]
        rules.append(
            {
                "id": code,
                "name": info["name"],
                "shortDescription": {"text": info["summary"].replace("`", "")},
                "fullDescription": {"text": _first_section(explanation)},
                "help": {"text": explanation, "markdown": f"# {info['name']} ({code})\n\n{info['fix']}\n\n{explanation}"},
                "helpUri": info["url"],
                "defaultConfiguration": {"level": "error", "enabled": bool(info["default"] and not info["preview"])},
                "properties": {
                    "tags": ["pytorch", "amp", "mixed-precision"],
                    "fix_availability": info["fix_availability"],
                    "state": info["state"],
                    "precision": "high",
                    "problem.severity": "error",
                },
            }
        )
    return rules


def _first_section(markdown: str) -> str:
    """The "What it does" paragraph, as plain text."""
    body = markdown.split("## What it does", 1)[-1]
    body = body.split("\n## ", 1)[0]
    return " ".join(body.split()).replace("`", "") or markdown


def _region(row: int, col: int, end_row: int, end_col: int) -> dict:
    region = {"startLine": max(row, 1), "startColumn": max(col, 0) + 1}
    if end_row >= row and (end_row, end_col) != (row, col):
        region["endLine"] = end_row
        region["endColumn"] = max(end_col, 0) + 1
    return region


def _sarif_fix(m: Message, location: dict) -> dict | None:
    if m.fix is None or not m.edits or m.cell is not None:
        return None
    replacements = []
    for e in m.edits:
        start, end = e["location"], e["end_location"]
        rep = {
            "deletedRegion": {
                "startLine": start["row"],
                "startColumn": start["column"],
                "endLine": end["row"],
                "endColumn": end["column"],
            }
        }
        if e.get("content"):
            rep["insertedContent"] = {"text": e["content"]}
        replacements.append(rep)
    return {
        "description": {"text": f"{m.fix.message} ({m.fix.applicability} fix)"},
        "artifactChanges": [{"artifactLocation": location, "replacements": replacements}],
    }


def format_sarif(messages: list[Message], summary: Summary) -> str:
    rules = _sarif_rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for m in messages:
        uri, base = _uri(m.path)
        artifact = {"uri": uri}
        if base:
            artifact["uriBaseId"] = base
        result: dict = {
            "ruleId": m.code,
            "level": "error",
            "message": {"text": m.message},
            "locations": [
                {"physicalLocation": {"artifactLocation": artifact, "region": _region(m.row, m.col, m.end_row, m.end_col)}}
            ],
        }
        if m.code in index:
            result["ruleIndex"] = index[m.code]
        props: dict = {}
        if m.cell is not None:
            props["cell"] = m.cell
        if m.is_error:
            props["kind"] = m.name or "error"
        if m.fix is not None:
            props["fix_applicability"] = m.fix.applicability
        if props:
            result["properties"] = props
        fix = _sarif_fix(m, artifact)
        if fix is not None:
            result["fixes"] = [fix]
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "amplint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": _cwd_uri()}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def _cwd_uri() -> str:
    cwd = os.getcwd().replace(os.sep, "/")
    if not cwd.startswith("/"):
        cwd = "/" + cwd
    return "file://" + quote(cwd.rstrip("/") + "/")


# ------------------------------------------------------------------------- GitLab Code Quality


def fingerprint(path: str, code: str, source_line: str | None, occurrence: int = 0) -> str:
    """Stable across line moves: the path, the rule and the text of the flagged line (stripped),
    not its row. ``occurrence`` tells apart identical lines in one file."""
    text = (source_line or "").strip()
    key = f"{_rel(path)}\0{code}\0{text}\0{occurrence}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def format_gitlab(messages: list[Message], summary: Summary) -> str:
    out = []
    seen: dict[tuple[str, str, str], int] = {}
    for m in messages:
        key = (_rel(m.path), m.code, (m.source_line or "").strip())
        n = seen.get(key, 0)
        seen[key] = n + 1
        out.append(
            {
                "check_name": m.code,
                "description": f"{m.code}: {m.message}",
                "categories": ["Bug Risk"],
                "severity": "major",
                "fingerprint": fingerprint(m.path, m.code, m.source_line, n),
                "location": {
                    "path": _rel(m.path),
                    "positions": {
                        "begin": {"line": m.row, "column": m.col + 1},
                        "end": {"line": m.end_row, "column": m.end_col + 1},
                    },
                },
            }
        )
    return json.dumps(out, indent=2) + "\n"


# ------------------------------------------------------------------------------- JUnit XML


def format_junit(messages: list[Message], summary: Summary) -> str:
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="amplint", tests=str(max(len(messages), 1)), failures=str(len(messages)), errors="0")
    if not messages:
        suite = ET.SubElement(suites, "testsuite", name="amplint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="No errors found", classname="amplint")
    by_path: dict[str, list[Message]] = {}
    for m in messages:
        by_path.setdefault(m.path, []).append(m)
    for path, ms in by_path.items():
        suite = ET.SubElement(suites, "testsuite", name=path, tests=str(len(ms)), failures=str(len(ms)), errors="0")
        for m in ms:
            where = f"cell {m.cell}, line {m.row}" if m.cell is not None else f"line {m.row}"
            case = ET.SubElement(
                suite, "testcase", name=f"org.amplint.{m.code}", classname=path, file=path, line=str(m.row), column=str(m.col + 1)
            )
            failure = ET.SubElement(case, "failure", message=m.message, type=m.code)
            failure.text = f"{where}, col {m.col + 1}, {m.message}"
    ET.indent(suites, space="    ")
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


FORMATTERS = {
    "sarif": format_sarif,
    "gitlab": format_gitlab,
    "junit": format_junit,
}

__all__ = ["FORMATTERS", "fingerprint", "format_gitlab", "format_junit", "format_sarif"]
