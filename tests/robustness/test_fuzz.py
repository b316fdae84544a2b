"""Property tests: random programs and random mutations of real AMP code never crash the
checker, and `fix` (unsafe fixes included) always yields code that parses and is a fixed point.

CI runs a small, derandomized budget. The long fuzz run (random seeds, many examples):

    AMPLINT_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest -q -p no:cacheprovider tests/robustness -k fuzz \
        --hypothesis-show-statistics

(20,000 mutants per mutation property, 1/100 of that from hypothesmith's grammar and 1/50 from
its CST strategy: about 14 minutes on two cores.)

Every crash it found is pinned in REGRESSIONS below (run by every CI run).
"""

from __future__ import annotations

import ast
import glob
import os
import textwrap

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as _hyp_event
from hypothesis.errors import InvalidArgument
from hypothesis import strategies as st

from amplint.analyze import analyze_text
import libcst

from amplint.fix.apply import CannotFix, fix_text
from amplint.rules import ALL_RULES
from robustness_util import REPO

LONG = int(os.environ.get("AMPLINT_FUZZ_EXAMPLES", "0"))


def fuzz_settings(ci_examples: int, long_share: float = 1.0):
    """``long_share``: the share of AMPLINT_FUZZ_EXAMPLES a slow generator gets (hypothesmith's
    grammar strategy takes ~2 s per program)."""
    return settings(
        max_examples=max(1, int(LONG * long_share)) if LONG else ci_examples,
        deadline=None,
        derandomize=not LONG,  # CI: the same examples every run; long run: fresh ones
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# ------------------------------------------------------------------------- the properties
def _want_all(d, lines):
    return d.fix is not None and d.fix.applicability in ("safe", "unsafe")


def event(name: str) -> None:
    try:
        _hyp_event(name)  # statistics for --hypothesis-show-statistics
    except InvalidArgument:  # called outside @given (the regression examples)
        pass


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def check_never_crashes(src: str) -> None:
    """analyze_text returns; its only per-file errors are E999, and only for unparsable text."""
    result = analyze_text(src, "fuzz.py")
    parses = _parses(src)
    event("parses" if _parses(src) else "does not parse")
    internal = [e for e in result.errors if e.code != "E999"]
    assert not internal, internal
    if parses:
        assert not result.errors or all("too deeply nested" in e.message for e in result.errors), result.errors
    else:
        assert result.errors and not result.diagnostics


def fix_parses_and_is_idempotent(src: str) -> None:
    try:
        fixed, n, _ = fix_text(src, "fuzz.py", _want_all)
    except CannotFix:
        # allowed only where Python parses the file and LibCST does not (reported, left alone)
        ast.parse(src)
        with pytest.raises(libcst.ParserSyntaxError):
            libcst.parse_module(src)
        event("LibCST cannot parse")
        return
    try:
        ast.parse(src)
    except (SyntaxError, ValueError):
        assert fixed == src and n == 0  # an unparsable file is never touched
        return
    event(f"fixes applied: {min(n, 3)}{'+' if n >= 3 else ''}")
    ast.parse(fixed)  # the fixer never writes code that does not parse
    again, n2, _ = fix_text(fixed, "fuzz.py", _want_all)
    assert again == fixed and n2 == 0, "fix is not idempotent"
    check_never_crashes(fixed)


# ------------------------------------------------------------------------- the seeds
def _seeds() -> list[str]:
    out = []
    for rule in ALL_RULES.values():
        out.extend(rule.valid)
        out.extend(inv.code for inv in rule.invalid)
        out.extend(inv.fixed for inv in rule.invalid if inv.fixed)
    for path in sorted(glob.glob(os.path.join(REPO, "fixtures", "**", "*.py"), recursive=True)):
        with open(path, encoding="utf-8") as fh:
            out.append(fh.read())
    return [textwrap.dedent(s) for s in out]


SEEDS = _seeds()

# Statements that move the loop model around: AMP calls, control flow, rebinding.
SNIPPETS = [
    "scaler.step(optimizer)", "scaler.update()", "scaler.scale(loss).backward()", "loss.backward()",
    "scaler.unscale_(optimizer)", "optimizer.step()", "optimizer.zero_grad()", "scaler = None",
    "scaler = torch.amp.GradScaler('cuda')", "scaler = torch.cuda.amp.GradScaler()", "del scaler",
    "with torch.autocast('cuda'):", "with torch.autocast(device_type='cuda', dtype=torch.float16):",
    "with torch.cuda.amp.autocast():", "for batch in loader:", "while True:", "if step % 2 == 0:",
    "else:", "try:", "finally:", "except Exception:", "break", "continue", "return loss", "yield",
    "pass", "def train(scaler, optimizer):", "class Trainer:", "async def f():", "lambda: scaler.update()",
    "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "scaler.step(optimizer); scaler.update()",
    "self.scaler.step(self.optimizer)", "accelerator.backward(loss)", "scaler.load_state_dict(sd)",
    "from torch.cuda.amp import GradScaler, autocast", "import apex.amp as amp", "global scaler",
    "nonlocal scaler", "match x:", "case 1:", "@torch.no_grad()", "x = (", ")", '"""', "#", "\\",
]


@st.composite
def mutants(draw):
    lines = draw(st.sampled_from(SEEDS)).splitlines(keepends=True) or ["\n"]
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "dedent", "insert", "tabify", "crlf"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if not lines:
            lines = ["\n"]
            continue
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "indent":
            lines[i] = "    " + lines[i]
        elif op == "dedent":
            lines[i] = lines[i][4:] if lines[i].startswith("    ") else lines[i].lstrip(" ")
        elif op == "insert":
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip(" \t"))]
            extra = draw(st.sampled_from(["", "    "]))
            lines.insert(i, indent + extra + draw(st.sampled_from(SNIPPETS)) + "\n")
        elif op == "tabify":
            lines[i] = lines[i].replace("    ", "\t")
        elif op == "crlf":
            lines[i] = lines[i].replace("\n", "\r\n")
    return "".join(lines)


# A random program from the grammar, placed around/inside real AMP code.
@st.composite
def grammar_programs(draw):
    prog = draw(hypothesmith.from_grammar())
    seed = draw(st.sampled_from(SEEDS))
    how = draw(st.sampled_from(["alone", "before", "after"]))
    if how == "alone":
        return prog
    if how == "before":
        return prog + ("\n" if prog and not prog.endswith("\n") else "") + seed
    return seed + prog


# ------------------------------------------------------------------------- regressions
# Inputs the long fuzz run broke (see /work/eval_issue7.md); each stays a CI example.
REGRESSIONS: list[str] = [
    # 1. (long run, 2026-11-29) a backslash continuation before an indented statement: Python
    #    parses it, LibCST raised ParserSyntaxError out of fix_text -> now CannotFix (E999
    #    "cannot fix", file untouched).
    '\nimport torch\nscaler = torch.amp.GradScaler("cuda")\nfor x in loader:\n    \\\n    probe_loss.backward()\n'
    "    scaler.scale(model(x)).backward()\n    scaler.step(opt)\n    scaler.update()\n    probe_opt.step()\n",
]


@pytest.mark.parametrize("src", REGRESSIONS or [SEEDS[0]], ids=lambda s: str(abs(hash(s)) % 10**6))
def test_fuzz_regressions(src):
    check_never_crashes(src)
    fix_parses_and_is_idempotent(src)


# ------------------------------------------------------------------------- the properties
@fuzz_settings(ci_examples=200)
@given(mutants())
def test_fuzz_mutants_never_crash_check(src):
    check_never_crashes(src)


@fuzz_settings(ci_examples=100)
@given(mutants())
def test_fuzz_fix_of_mutants_parses_and_is_idempotent(src):
    fix_parses_and_is_idempotent(src)


@fuzz_settings(ci_examples=2, long_share=0.01)
@given(grammar_programs())
def test_fuzz_grammar_programs_never_crash(src):
    check_never_crashes(src)
    fix_parses_and_is_idempotent(src)


@fuzz_settings(ci_examples=15, long_share=0.02)
@given(hypothesmith.from_node())
def test_fuzz_cst_programs_never_crash(src):
    check_never_crashes(src)
    fix_parses_and_is_idempotent(src)
