"""Analyse one file: screen, parse once, build the loop model, run every rule (a rule that
crashes is contained to this file as AMP900)."""

from __future__ import annotations

import gc
import sys

from amplint.diagnostics import FileError, FileResult
from amplint.parse import parse, parse_masked, syntax_error
from amplint.model import build_model
from amplint.screen import may_contain_amp
from amplint.source import Source, SourceError, decode, read_source

# Parse only the top-level definitions that can matter (amplint.parse); False: whole files.
MASK = True

BUG_HINT = "this is a bug in amplint; please report it with the file that triggers it"

# The torch version the checked project targets (settings.target_torch_version); rules read it
# from ``FileModel.target_torch_version``. Set once per run by the pipeline (and in each worker
# of the process pool); part of ``Settings.fingerprint`` so the cache follows it.
TARGET_TORCH_VERSION: str | None = None

# The codes whose rules run (the run's enabled selection, so that rules nobody asked for, the
# preview framework rules among them, cost nothing); None: every rule. Part of the cache key.
RULE_CODES: frozenset[str] | None = None


def configure(target_torch_version: str | None, rule_codes=None) -> None:
    global TARGET_TORCH_VERSION, RULE_CODES
    from amplint import screen

    TARGET_TORCH_VERSION = target_torch_version
    RULE_CODES = None if rule_codes is None else frozenset(rule_codes)
    screen.FRAMEWORKS = RULE_CODES is None or any(c.startswith("AMP4") for c in RULE_CODES)
    screen.CHECKPOINTS = RULE_CODES is None or "AMP301" in RULE_CODES


def load_rules():
    """Import the configured rules now (their modules load on first use), so that a per-file
    time budget measures the analysis, not the imports (an import cut short by the budget
    would be paid again by the next file)."""
    return _configured_rules()


def _configured_rules():
    if RULE_CODES is None:
        from amplint.rules import ALL_RULES

        return ALL_RULES
    from amplint.rules import rules_for

    return rules_for(RULE_CODES)


def analyze_text(text: str, path: str, rules=None, index=None) -> FileResult:
    """Every rule's raw findings (before selection and noqa) for one decoded file, and the
    file's summary (phase 1 of project mode). With a project ``index`` (phase 2), calls into
    other modules are followed; without one, the file is its own project."""
    result = FileResult(path)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # ast trees are acyclic; collecting during the parse only costs time
    try:
        return _analyze(text, path, rules, result, index)
    finally:
        if gc_was_enabled:
            gc.enable()


def _analyze(text: str, path: str, rules, result: FileResult, index) -> FileResult:
    from amplint.model.summary import summarise

    try:
        masked = MASK and parse_masked(text, path, helpers=getattr(index, "amp_helpers", ()))
        tree, dropped = masked or (parse(text, path), frozenset())
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        result.errors.append(syntax_error(exc))
        return result
    try:
        result.summary = summarise(tree, source=text, dropped=dropped)
        if index is None:  # the file is its own project: its index holds the summary just made
            import os

            from amplint.model.index import ProjectIndex

            index = ProjectIndex([os.path.dirname(os.path.abspath(path))], [path], {path: result.summary})
        model = build_model(text, tree, path, index)
        model.masked = bool(masked)
        if TARGET_TORCH_VERSION is not None:
            model.target_torch_version = TARGET_TORCH_VERSION
    except RecursionError:
        result.errors.append(FileError("E999", "too deeply nested to analyse (recursion limit)"))
        return result
    except Exception as exc:  # an internal error: contain it to this file
        result.errors.append(_internal("model", exc))
        return result
    for rule in (rules if rules is not None else _configured_rules()).values():
        try:
            for d in rule.check(model):
                result.diagnostics.append(d._replace(path=path))
        except RecursionError:
            result.errors.append(FileError("E999", f"{rule.code}: too deeply nested to analyse (recursion limit)"))
        except Exception as exc:
            result.errors.append(_internal(rule.code, exc))
    model.dispose()
    result.diagnostics.sort(key=lambda d: d.sort_key)
    return result


def _internal(where: str, exc: BaseException) -> FileError:
    import traceback  # only on an internal error (it costs ~3 ms of start-up)

    tb = traceback.extract_tb(exc.__traceback__)
    loc = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return FileError(
        "AMP900",
        f"internal error in {where}: {type(exc).__name__}: {exc}{loc} ({BUG_HINT})",
        internal=True,
    )


def analyze_path(path: str) -> tuple[FileResult, Source | None]:
    """Read, screen and analyse a file. A file that cannot hold AMP code is not parsed."""
    try:
        src = read_source(path)
    except SourceError as exc:
        code = "E902"
        return FileResult(path, errors=[FileError(code, str(exc))]), None
    if not may_contain_amp(src.data):
        return FileResult(path), src
    return analyze_text(src.text, path), src


def analyze_bytes(data: bytes, path: str) -> FileResult:
    if path.endswith(".ipynb"):  # the code cells, joined (amplint.notebook)
        from amplint.notebook import analyze_notebook_bytes

        return analyze_notebook_bytes(data, path)
    if not may_contain_amp(data):
        return FileResult(path)
    try:
        text, _ = decode(data)
    except SourceError as exc:
        return FileResult(path, errors=[FileError("E902", str(exc))])
    return analyze_text(text, path)


if __name__ == "__main__":  # pragma: no cover - debugging aid
    for p in sys.argv[1:]:
        r, _ = analyze_path(p)
        for d in r.diagnostics:
            print(f"{p}:{d.row}:{d.col + 1}: {d.code} {d.message}")
        for e in r.errors:
            print(f"{p}:{e.row}:{e.col + 1}: {e.code} {e.message}")
