"""The rule registry. One rule per module; each carries its code, name, docs and its own
valid/invalid examples (which the test-suite runs, Fixit-style)."""

from __future__ import annotations

import ast

from amplint.diagnostics import Diagnostic, Fix
from amplint.meta import RULE_DOCS_URL as DOCS_URL  # the one project URL (amplint/meta.py)
from amplint.record import Record

TYPE_CHECKING = False  # typing costs ~3 ms of start-up: the annotations below stay strings
if TYPE_CHECKING:
    from typing import ClassVar, Iterable, Literal

    from amplint.model import FileModel

    Severity = Literal["error", "warning"]

# severity: the one definition every output reads (`amplint rule`/`rules`, docs/rules.md, the
# text formats, JSON, SARIF, GitHub, GitLab and the editor). Every rule declares its own
# ``severity``; docs/severities.md gives the reasoning for each.
SEVERITIES = {
    "error": "breaks training or raises: wrong or lost gradients, skipped or inf steps, an "
    "exception, scaler state lost on resume",
    "warning": "deprecated, or merely wasteful or harmless today: the run trains correctly",
}
# severity_of and the codes that are not rules live in amplint.rule_table (the check path reads
# them without importing the rules); re-exported here
from amplint.rule_table import NON_RULE_SEVERITY, severity_of  # noqa: E402,F401


class Invalid(Record):
    """An example the rule must flag ``count`` times. ``fixed`` is the exact source after
    ``amplint fix`` (with ``--unsafe-fixes`` when ``unsafe``); None when no fix applies."""

    code: str
    fixed: str | None = None
    count: int = 1
    unsafe: bool = False


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]  # declared by every rule (see SEVERITIES); no default
    summary: ClassVar[str]  # one line, for `amplint rules`
    docs: ClassVar[str]  # markdown: What it does / Why is this bad? / Example / Use instead / Fix safety
    fix_availability: ClassVar[Literal["always", "sometimes", "never"]] = "never"
    preview: ClassVar[bool] = False  # preview rules run only with --preview / preview = true
    default: ClassVar[bool] = True  # False: must be selected explicitly (info-level rules)
    valid: ClassVar[list[str]] = []
    invalid: ClassVar[list[Invalid]] = []

    def check(self, model: "FileModel") -> Iterable[Diagnostic]:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- fixability: every label (`amplint rules`, `amplint rule`, README, docs/rules.md,
    # SARIF) is derived here, from `fix_availability` and the fixes the rule's own examples
    # show (an example's `fixed` text is what `amplint fix` writes; tests/test_cli_rules.py
    # checks these applicabilities against the fixes the rule really produces).

    @property
    def fix_applicabilities(self) -> tuple[str, ...]:
        """The applicabilities of this rule's fixes: () when it has none; ("display-only",)
        when a fix is shown and never applied; else "safe" and/or "unsafe"."""
        if self.fix_availability == "never":
            return ()
        applied = {"unsafe" if ex.unsafe else "safe" for ex in self.invalid if ex.fixed is not None}
        return tuple(sorted(applied)) if applied else ("display-only",)

    @property
    def fix_label(self) -> str:
        """The short label: no, display-only, yes, sometimes (with "unsafe" when every fix is)."""
        kinds = self.fix_applicabilities
        if not kinds:
            return "no"
        if kinds == ("display-only",):
            return "display-only"
        label = "yes" if self.fix_availability == "always" else "sometimes"
        return f"{label} (unsafe)" if kinds == ("unsafe",) else label

    @property
    def fix_sentence(self) -> str:
        """The line under a rule page's title."""
        kinds = self.fix_applicabilities
        if not kinds:
            return "Fix is not available."
        how = self.fix_availability  # always / sometimes
        if kinds == ("display-only",):
            return f"Fix is {how} shown, never applied (display-only)."
        line = f"Fix is {how} available."
        if kinds == ("unsafe",):
            return line + " It is unsafe: applied only with `--unsafe-fixes`."
        if "unsafe" in kinds:
            return line + " Some fixes are unsafe: applied only with `--unsafe-fixes`."
        return line

    @property
    def url(self) -> str:
        return DOCS_URL.format(code_lower=self.code.lower(), name=self.name)

    def diagnostic(
        self,
        model: "FileModel",
        node: ast.AST,
        message: str,
        fix: Fix | None = None,
        stmt: ast.AST | None = None,
        why: tuple = (),
    ) -> Diagnostic:
        row, col, erow, ecol = model.span(node)
        return Diagnostic(
            code=self.code,
            message=message,
            row=row,
            col=col,
            end_row=erow,
            end_col=ecol,
            fix=fix,
            stmt_row=getattr(stmt, "lineno", None) if stmt is not None else None,
            why=why,
        )


RULE_MODULES = [
    "amp001_missing_scaler_update",
    "amp002_backward_inside_autocast",
    "amp003_multiple_grad_scalers",
    "amp004_optimizer_step_bypasses_scaler",
    "amp005_unscaled_backward",
    "amp006_clip_before_unscale",
    "amp007_repeated_scaler_update",
    "amp008_repeated_unscale_or_step",
    "amp009_zero_grad_before_step",
    "amp010_step_closure_with_scaler",
    "amp011_update_without_step",
    "amp012_jump_between_step_and_update",
    "amp101_deprecated_amp_api",
    "amp102_unknown_grad_scaler_attribute",
    "amp103_autocast_missing_device_type",
    "amp104_apex_amp",
    "amp201_fp16_autocast_without_scaler",
    "amp202_half_model_with_scaler",
    "amp203_scaler_with_bfloat16",
    "amp301_checkpoint_missing_scaler_state",
    "amp302_scaler_state_discarded",
    "amp401_accelerate_clip_scaled_grads",
    "amp402_accelerate_unscale_per_micro_batch",
    "amp403_fp16_weights_under_framework_amp",
    "amp404_double_loss_scaling",
    "amp405_lightning_manual_backward",
]


def _rules_of(modules) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for name in modules:
        mod = __import__(f"amplint.rules.{name}", fromlist=("_",))
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == mod.__name__:
                rules[obj.code] = obj()
    return dict(sorted(rules.items()))


_LOADED: dict[str, Rule] = {}


def rules_for(codes) -> dict[str, Rule]:
    """The rules of ``codes`` only, importing just their modules (a run that selects the
    default rules never imports the preview framework rules). A module holds the rule whose
    code starts its name."""
    wanted = {c.upper() for c in codes}
    missing = [m for m in RULE_MODULES if m[:6].upper() in wanted and m[:6].upper() not in _LOADED]
    if missing:
        _LOADED.update(_rules_of(missing))
    return {c: r for c, r in sorted(_LOADED.items()) if c in wanted}


def __getattr__(name: str):
    # ALL_RULES (every rule, every module imported) on first use (PEP 562)
    if name == "ALL_RULES":
        rules = rules_for(m[:6].upper() for m in RULE_MODULES)
        globals()["ALL_RULES"] = rules
        return rules
    raise AttributeError(f"module 'amplint.rules' has no attribute {name!r}")
