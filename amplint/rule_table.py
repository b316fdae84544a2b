"""What the check path needs to know of every rule without importing the rules: code, name,
severity, whether it runs by default and whether it is preview. Reporting a warm-cache run,
selecting rules and writing messages read this table; only analysis imports ``amplint.rules``
(the rule modules and the model behind them cost more than the interpreter's own start-up).

Each rule module declares these attributes itself; tests/test_rule_table.py checks that this
table says exactly the same (add a row here when adding a rule). No imports but ``meta``."""

from __future__ import annotations

from amplint.meta import RULE_DOCS_URL


class RuleInfo:
    __slots__ = ("code", "name", "severity", "default", "preview")

    def __init__(self, code: str, name: str, severity: str, default: bool, preview: bool):
        self.code, self.name, self.severity, self.default, self.preview = code, name, severity, default, preview

    @property
    def url(self) -> str:
        return RULE_DOCS_URL.format(code_lower=self.code.lower(), name=self.name)


_ROWS = (
    ("AMP001", "missing-scaler-update", "error", True, False),
    ("AMP002", "backward-inside-autocast", "warning", True, False),
    ("AMP003", "multiple-grad-scalers", "error", True, False),
    ("AMP004", "optimizer-step-bypasses-scaler", "error", True, False),
    ("AMP005", "unscaled-backward", "error", True, False),
    ("AMP006", "clip-before-unscale", "error", True, False),
    ("AMP007", "repeated-scaler-update", "error", True, False),
    ("AMP008", "repeated-unscale-or-step", "error", True, False),
    ("AMP009", "zero-grad-before-step", "error", True, False),
    ("AMP010", "step-closure-with-scaler", "error", True, False),
    ("AMP011", "update-without-step", "error", True, False),
    ("AMP012", "jump-between-step-and-update", "error", True, False),
    ("AMP101", "deprecated-amp-api", "warning", True, False),
    ("AMP102", "unknown-grad-scaler-attribute", "error", True, False),
    ("AMP103", "autocast-missing-device-type", "error", True, False),
    ("AMP104", "apex-amp", "warning", True, False),
    ("AMP201", "fp16-autocast-without-scaler", "error", True, False),
    ("AMP202", "half-model-with-scaler", "error", True, False),
    ("AMP203", "scaler-with-bfloat16", "warning", False, False),
    ("AMP301", "checkpoint-missing-scaler-state", "error", True, False),
    ("AMP302", "scaler-state-discarded", "error", True, False),
    ("AMP401", "accelerate-clip-scaled-grads", "error", True, True),
    ("AMP402", "accelerate-unscale-per-micro-batch", "error", True, True),
    ("AMP403", "fp16-weights-under-framework-amp", "error", True, True),
    ("AMP404", "double-loss-scaling", "error", True, True),
    ("AMP405", "lightning-manual-backward", "error", True, True),
)

RULES: dict[str, RuleInfo] = {row[0]: RuleInfo(*row) for row in _ROWS}

# codes that are not rules: a file that could not be read (E902) or parsed (E999), an internal
# error (AMP900) or a file whose analysis ran out of time (AMP901): the file went unchecked
NON_RULE_SEVERITY = {"E902": "error", "E999": "error", "AMP900": "error", "AMP901": "error"}


def severity_of(code: str, warnings_as_errors: bool = False) -> str:
    """The severity a finding of ``code`` is reported with (``warnings-as-errors`` reports
    every warning as an error). An unknown code is an error."""
    if warnings_as_errors:
        return "error"
    info = RULES.get(code)
    if info is not None:
        return info.severity
    return NON_RULE_SEVERITY.get(code, "error")
