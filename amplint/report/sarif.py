"""``sarif``: SARIF 2.1.0 with every rule's documentation and, for fixable findings, the fix
as ``fixes[].artifactChanges``."""

from __future__ import annotations

import json
import os
from urllib.parse import quote

from amplint import __version__
from amplint.meta import PROJECT_URL as INFORMATION_URI  # the one project URL
from amplint.report import Message, Summary
from amplint.report.paths import SRCROOT, artifact_uri

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

def _sarif_rules(warnings_as_errors: bool = False):
    from amplint.docs import rule_json
    from amplint.rules import ALL_RULES, severity_of

    rules = []
    for code, rule in ALL_RULES.items():
        info = rule_json(rule)
        level = severity_of(code, warnings_as_errors)  # SARIF's levels include error and warning
        explanation = info["explanation"]
        rules.append(
            {
                "id": code,
                "name": info["name"],
                "shortDescription": {"text": info["summary"].replace("`", "")},
                "fullDescription": {"text": _first_section(explanation)},
                "help": {"text": explanation, "markdown": f"# {info['name']} ({code})\n\n{info['fix']}\n\n{explanation}"},
                "helpUri": info["url"],
                "defaultConfiguration": {"level": level, "enabled": bool(info["default"] and not info["preview"])},
                "properties": {
                    "tags": ["pytorch", "amp", "mixed-precision"],
                    "fix_availability": info["fix_availability"],
                    "fix_applicabilities": info["fix_applicabilities"],
                    "fixability": info["fix_label"],
                    "state": info["state"],
                    "precision": "high",
                    "problem.severity": level,  # GitHub code scanning: error, warning, recommendation
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
    rules = _sarif_rules(summary.warnings_as_errors)
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for m in messages:
        uri, base = artifact_uri(m.path)
        artifact = {"uri": uri}
        if base:
            artifact["uriBaseId"] = base
        result: dict = {
            "ruleId": m.code,
            "level": m.severity,
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
