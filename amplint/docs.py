"""Rule documentation, generated from the rule modules (ruff's page layout)."""

from __future__ import annotations

import textwrap

from amplint.rules import ALL_RULES, Rule

FIX_LINE = {
    "always": "Fix is always available.",
    "sometimes": "Fix is sometimes available.",
    "never": "Fix is not available.",
}


def state(rule: Rule) -> str:
    if rule.preview:
        return "preview"
    if not rule.default:
        return "opt-in"
    return "enabled"


def rule_markdown(rule: Rule) -> str:
    head = f"# {rule.name} ({rule.code})\n\n{FIX_LINE[rule.fix_availability]}"
    if rule.preview:
        head += "\n\nThis rule is in preview: it runs only with `--preview` (or `preview = true`) or when selected by its exact code."
    elif not rule.default:
        head += "\n\nThis rule is off by default: enable it with `--extend-select " + rule.code + "`."
    return head + "\n" + textwrap.dedent(rule.docs).rstrip() + "\n"


def rule_json(rule: Rule) -> dict:
    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "fix": FIX_LINE[rule.fix_availability],
        "fix_availability": rule.fix_availability,
        "preview": rule.preview,
        "default": rule.default,
        "state": state(rule),
        "explanation": textwrap.dedent(rule.docs).strip(),
        "url": rule.url,
    }


def rules_table(markdown: bool = False) -> str:
    rows = [(r.code, r.name, {"always": "yes", "sometimes": "sometimes", "never": "no"}[r.fix_availability], state(r), r.summary) for r in ALL_RULES.values()]
    if markdown:
        out = ["| code | name | fix | state | summary |", "|---|---|---|---|---|"]
        out += [f"| {c} | `{n}` | {f} | {s} | {m} |" for c, n, f, s, m in rows]
        return "\n".join(out)
    w = max(len(r[1]) for r in rows)
    out = [f"{'code':<7} {'name':<{w}}  {'fix':<9}  {'state':<8}  summary"]
    out += [f"{c:<7} {n:<{w}}  {f:<9}  {s:<8}  {m}" for c, n, f, s, m in rows]
    return "\n".join(out)
