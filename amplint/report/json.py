"""``json`` (ruff's record layout) and ``json-lines``."""

from __future__ import annotations

import json
import os

from amplint.report import Message, Summary


def to_json_obj(m: Message) -> dict:
    fix = None
    if m.fix is not None:
        fix = {
            "applicability": m.fix.applicability,
            "message": m.fix.message,
            "edits": m.edits if m.edits is not None else [],
        }
    return {
        "cell": m.cell,
        "code": m.code,
        "end_location": {"column": m.end_col + 1, "row": m.end_row},
        "filename": m.path if m.path == "-" else os.path.abspath(m.path),  # absolute, as ruff's
        "fix": fix,
        "location": {"column": m.col + 1, "row": m.row},
        "message": m.message,
        "noqa_row": m.noqa_row if not m.is_error else None,
        "severity": m.severity,
        "url": m.url,
    }


def format_json(messages: list[Message], summary: Summary) -> str:
    return json.dumps([to_json_obj(m) for m in messages], indent=2) + "\n"


def format_json_lines(messages: list[Message], summary: Summary) -> str:
    return "".join(json.dumps(to_json_obj(m)) + "\n" for m in messages)
