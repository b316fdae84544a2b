"""The orchestrator of `amplint check`/`fix`; it reads top to bottom as the data flows:

    settings -> discover -> (screen -> parse -> model -> rules, per file: amplint.runner)
             -> select/noqa -> fixes -> messages -> report
"""

from __future__ import annotations

import os
import re
import sys

from amplint.lazyre import ascii_fast
from amplint.fspath import absolute, pinned_cwd
from amplint.diagnostics import Diagnostic, FileError, FileResult
from amplint.report import Message, Summary, display_path, echo, emit, formatter
from amplint.selection import Filter, enabled_codes, validate_per_file_ignores
from amplint.settings import ConfigError, Settings, resolve


class Options:
    """The command-line options of `check`/`fix` (see amplint.cli)."""

    paths: tuple[str, ...]
    fix: bool
    unsafe_fixes: bool
    diff: bool
    exit_zero: bool
    warnings_as_errors: bool = False
    exit_non_zero_on_fix: bool
    statistics: bool
    output_format: str
    output_file: str | None
    select: tuple[str, ...] | None
    extend_select: tuple[str, ...] | None
    ignore: tuple[str, ...] | None
    preview: bool | None
    target_torch_version: str | None
    no_cache: bool
    cache_dir: str | None
    config_path: str | None
    isolated: bool
    force_exclude: bool | None
    stdin_filename: str | None
    add_noqa: bool
    show_files: bool
    quiet: bool
    jobs: int | None
    per_file_timeout: float | None = None  # None: runner's default (30 s); 0: no budget

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @classmethod
    def from_cli(cls, kw: dict) -> "Options":
        def split(v):
            if v is None:
                return None
            return tuple(s.strip() for s in v.split(",") if s.strip())

        return cls(
            paths=tuple(kw["paths"]),
            fix=bool(kw["fix"]),
            unsafe_fixes=kw["unsafe_fixes"],
            diff=kw["diff"],
            exit_zero=kw["exit_zero"],
            warnings_as_errors=bool(kw.get("warnings_as_errors")),
            exit_non_zero_on_fix=kw["exit_non_zero_on_fix"],
            statistics=kw["statistics"],
            output_format=kw["output_format"] or "full",
            output_file=kw["output_file"],
            select=split(kw["select"]),
            extend_select=split(kw["extend_select"]),
            ignore=split(kw["ignore"]),
            preview=kw["preview"],
            target_torch_version=kw["target_torch_version"],
            no_cache=kw["no_cache"],
            cache_dir=kw["cache_dir"],
            config_path=kw["config_path"],
            isolated=kw["isolated"],
            force_exclude=kw["force_exclude"],
            stdin_filename=kw["stdin_filename"],
            add_noqa=kw["add_noqa"],
            show_files=kw["show_files"],
            quiet=kw["quiet"],
            jobs=kw["jobs"],
            per_file_timeout=kw.get("per_file_timeout"),
        )


def run_check(opts: Options) -> int:
    try:
        with pinned_cwd():
            return _run_check(opts)
    finally:
        _reset_engine()


def _reset_engine() -> None:
    """The engine's configuration (rule selection, target version) lasts one run: a caller in
    the same process (an editor, a test) gets every rule again. Never imports the engine."""
    engine = sys.modules.get("amplint.analyze")
    if engine is not None:
        engine.configure(None, None)


def _run_check(opts: Options) -> int:
    # settings: [tool.amplint] + flags; a bad configuration is a usage error (exit 2)
    try:
        settings = resolve(opts)
        enabled = enabled_codes(settings, settings.config_path or "--select/--ignore")
        validate_per_file_ignores(settings)
    except ConfigError as exc:
        echo(f"error: {exc}", err=True)
        return 2
    if opts.statistics and opts.output_format not in ("full", "concise", "json"):
        echo(f"error: --statistics prints the formats full, concise and json, not `{opts.output_format}`", err=True)
        return 2
    filt = Filter(settings, enabled)
    if list(opts.paths) == ["-"]:
        _configure_engine(settings, enabled)
        return _run_stdin(opts, settings, filt)

    # discover
    from amplint.discover import discover

    found = discover(list(opts.paths) or ["."], settings, memo_dir=_cache_dir(opts, settings))
    if opts.show_files:
        emit("".join(display_path(f) + "\n" for f in found.files), None)
        return 0

    # analyse every file (screen, parse, model, rules), cached by content
    results = _analyse(found.files, opts, settings, enabled)
    for f, r in zip(found.files, results):  # as named or walked, cached or not: shown as ruff does
        r.path = display_path(f)
    results += [FileResult(display_path(p), errors=[FileError("E902", "No such file or directory")]) for p in found.missing]

    # fix (or diff, or add noqa), then re-analyse what changed
    text_cache: dict[str, list[str] | None] = {}
    fixed_total, diffs, write_failures = 0, [], []
    if opts.fix or opts.diff or opts.add_noqa:
        from amplint.fix.files import fix_files

        _configure_engine(settings, enabled)
        results, fixed_total, diffs, write_failures = fix_files(results, opts, filt, text_cache)
        if opts.add_noqa:  # ruff's wording and exit status; nothing else is reported
            echo(f"Added {fixed_total} noqa directive{'s' if fixed_total != 1 else ''}.", err=True)
            for r in results:
                for e in r.errors:
                    echo(f"{r.path}: error: {e.code} {e.message}", err=True)
            return 2 if any(e.internal for r in results for e in r.errors) else 0

    # select, noqa -> messages
    messages: list[Message] = []
    for r in results:
        messages += file_messages(r, filt, opts.unsafe_fixes, text_cache)
    messages += write_failures
    messages.sort(key=lambda m: (m.path, m.row, m.col, m.code))
    internal = any(e.internal for r in results for e in r.errors)

    # report
    if opts.diff:
        emit("".join(diffs), opts.output_file)
        if diffs:
            echo(f"Would fix {fixed_total} error{'s' if fixed_total != 1 else ''} in {len(diffs)} file{'s' if len(diffs) != 1 else ''}.", err=True)
        else:
            echo("No errors would be fixed.", err=True)
        return 2 if internal else (1 if diffs else 0)
    summary = Summary(
        fixed=fixed_total,
        remaining_fixable=sum(m.applicable for m in messages),
        hidden_unsafe=sum(1 for m in messages if not m.applicable and m.fix is not None and m.fix.applicability == "unsafe"),
        files=len(found.files),
        fix_mode=opts.fix,
        warnings_as_errors=settings.warnings_as_errors,
    )
    _report(messages, summary, opts)

    if internal:
        return 2
    if opts.exit_zero:
        return 0
    if opts.fix and opts.exit_non_zero_on_fix and fixed_total:
        return 1
    return 1 if messages else 0


def _analyse(files: list[str], opts: Options, settings: Settings, enabled: set[str]) -> list[FileResult]:
    cache = None
    if not opts.no_cache:
        from amplint.cache import Cache

        cache = Cache(_cache_dir(opts, settings), settings.root, f"{settings.fingerprint()};rules={','.join(sorted(enabled))}")
    from amplint.runner import DEFAULT_PER_FILE_TIMEOUT, run

    timeout = DEFAULT_PER_FILE_TIMEOUT if opts.per_file_timeout is None else opts.per_file_timeout
    paths = list(opts.paths) or ["."]
    # phase 1 on the files to report and, when only some were given (pre-commit, an editor, a
    # sub-folder), on the rest of the project too: the index covers the project either way
    others = _rest_of_project(paths, files, settings, _cache_dir(opts, settings))
    results = run(files + others, cache, opts.jobs, timeout=timeout, target_torch_version=settings.target_torch_version,
                  rule_codes=enabled, save=False)
    try:
        return _project_phase(files, others, results, paths, settings, enabled, cache)
    finally:
        if cache is not None:
            cache.save()


def _project_phase(files, others, results, paths, settings, enabled, cache) -> list[FileResult]:
    key = cache.project_key(files, others, results, paths) if cache is not None else None
    done = cache.project_results(key) if key is not None else None
    if done is not None:  # nothing in the project changed: phase 2's findings as they were
        out = results[: len(files)]
        for i, r in done:
            out[i] = r
        return out
    out = project_pass(results[: len(files)], results[len(files):], paths, settings, enabled)
    if key is not None:
        cache.store_project(key, [(i, r) for i, r in enumerate(out) if r is not results[i]])
    return out


def _cache_dir(opts: Options, settings: Settings) -> str | None:
    if opts.no_cache:
        return None
    return settings.cache_dir or os.path.join(settings.root, ".amplint_cache")


def _configure_engine(settings: Settings, enabled: set[str] | None) -> None:
    """The analysis engine loads only when something is analysed (the runner configures it
    then; a warm-cache run loads none of it); fixing, stdin and project mode analyse here.
    Only the ``enabled`` rules run (None: all)."""
    from amplint import analyze

    analyze.configure(settings.target_torch_version, enabled)


def _rest_of_project(paths: list[str], files: list[str], settings: Settings, memo_dir: str | None = None) -> list[str]:
    from amplint.discover import discover, project_root

    root = project_root(settings, paths)
    if os.path.abspath(root) in {os.path.abspath(p) for p in paths}:
        return []
    have = {absolute(f) for f in files}
    return [f for f in discover([root], settings, suffixes=(".py",), memo_dir=memo_dir).files if absolute(f) not in have]


def project_pass(results: list[FileResult], others: list[FileResult], paths: list[str], settings: Settings,
                 enabled: set[str] | None = None) -> list[FileResult]:
    """Phases 2 and 3 of project mode: index the project (module names of every file under the
    source roots, the summaries phase 1 made, other files summarised on demand) and
    re-analyse, with the index, the files to report that call into other modules of the
    project or use its AMP helpers."""
    from amplint.discover import project_root
    from amplint.model.index import ProjectIndex

    root = project_root(settings, paths)
    roots = [os.path.normpath(os.path.join(root, s)) for s in settings.src]
    everything = results + others
    aps = [absolute(r.path) for r in everything]  # once: thousands of files, each asked about several times
    summaries = {ap: r.summary for r, ap in zip(everything, aps) if r.summary is not None}
    index = ProjectIndex(roots, aps, summaries)
    index.restores_optimizer = any(getattr(r, "restores", True) for r in everything)
    index.scaler_state_files = {ap for r, ap in zip(everything, aps) if getattr(r, "scaler_state", True)}
    index.restoring_files = {ap for r, ap in zip(everything, aps) if getattr(r, "restores", True)}
    index.project_files = aps
    if index.restores_optimizer:  # the scripts AMP301 may ask about: one read of the project for all
        index.mentioned([os.path.splitext(os.path.basename(r.path))[0] for r in results
                         if r.path.endswith(".py") and any(d.code == "AMP301" for d in r.diagnostics)])
    wanted = _users_of(index, summaries)
    index.amp_helpers = frozenset(n.decode() for n in wanted.words) if wanted is not None else frozenset()
    bases = index.scaled_base_files() if enabled is None or "AMP301" in enabled else set()
    subclassers = _AutocastSubclassers.of(index, summaries) if enabled is None or "AMP002" in enabled or "AMP201" in enabled else None
    heirs = _ScalerHeirs.of(index, summaries) if enabled is None or "AMP301" in enabled else None
    per_call = set()  # files with a top-level function that builds its own scaler and is called once per epoch elsewhere (AMP302)
    if enabled is None or "AMP302" in enabled:
        made = [(r.path, q) for r in results if r.summary is not None and not r.errors
                for q, f in r.summary.functions.items() if f.builds_scaler and f.cls is None and "." not in q
                and not any(c.callee == q for g in r.summary.functions.values() for c in g.calls)]  # not its own file's entry point
        if made:
            per_call = {p for p, _q in index.imported_by_name(made)}
    out = []
    for r, ap in zip(results, aps):
        if bases and ap in bases and not r.errors and r.path.endswith(".py"):
            _configure_engine(settings, enabled)
            out.append(_reanalyse(r, index))  # a base class whose methods run for a subclass's scaler
        elif r.summary is None and not r.errors and r.path.endswith(".py") and (near := [
            x for x in (wanted, subclassers, heirs) if x is not None and x.may_import(ap)
        ]):  # screened out, but may use a project AMP helper, subclass a base that calls it under
            # autocast (AMP002) or subclass a base that builds the scaler (AMP301)
            _configure_engine(settings, enabled)
            out.append(_reanalyse(r, index, _AnyOf(near)))
        elif r.summary is not None and not r.errors and (
            _calls_out(index, r) or any(d.code == "AMP301" for d in r.diagnostics)  # judged again with the project:
            # a script that never resumes, a project that never does, a scaler attribute nothing uses
            or any(fact.injected for fact in r.summary.classes.values())  # a class handed its scaler (AMP301)
            or _returns_own_state(r.summary)  # a class whose state_dict() leaves out its scaler (AMP301)
            or ap in per_call  # a function building its own scaler, another module calls it once per epoch (AMP302)
        ):  # a checkpoint the file alone took for a training one, in a project that never resumes
            _configure_engine(settings, enabled)
            out.append(_reanalyse(r, index))
        else:
            out.append(r)
    return out


class _AnyOf:
    """Several screens of a screened-out file: it is analysed again when one of them matches."""

    def __init__(self, screens):
        self.screens = screens

    def search(self, data: bytes):
        return next((m for x in self.screens if (m := x.search(data)) is not None), None)


class _NamesNearby:
    """Names defined by some project files, and where a file that can import them lives: a
    module of the same top-level package (absolute or relative import), a script beside
    one of those files (``from helpers import f``), or a script in a directory above them
    (``train.py`` at the root importing ``from pkg.utils.amp import amp_ctx``)."""

    def __init__(self, index, words: set[str], paths):
        self.index = index
        self.words = [n.encode() for n in sorted(words)]
        self.heads = {m.split(".", 1)[0] for p in paths if (m := index.module_of.get(absolute(p)))}
        self.dirs = {os.path.dirname(absolute(p)) for p in paths}
        self.above = set()
        for d in self.dirs:
            while (up := os.path.dirname(d)) != d and d not in self.index.roots:
                d = up
                self.above.add(d)

    def may_import(self, ap: str) -> bool:
        """``ap``: an absolute path."""
        m = self.index.module_of.get(ap)
        d = os.path.dirname(ap)
        return (m is not None and m.split(".", 1)[0] in self.heads) or d in self.dirs or (d in self.above and (m is None or "." not in m))


class _AutocastSubclassers(_NamesNearby):
    """The project classes whose methods call ``self.<m>()`` inside autocast (a base
    trainer's ``with autocast(): self.step(batch)``): a screened-out file that names one of
    them and runs a backward may define the ``step`` that runs under it (AMP002)."""

    @classmethod
    def of(cls, index, summaries) -> "_AutocastSubclassers | None":
        names, paths = set(), set()
        for path, s in summaries.items():
            for qual, f in s.functions.items():
                if "." in qual and any(c.in_autocast and c.callee.startswith("self.") for c in f.calls):
                    names.add(qual.rsplit(".", 2)[-2])
                    paths.add(path)
        return cls(index, names, paths) if names else None

    def search(self, data: bytes):
        if b"backward" not in data:
            return None
        return next((w for w in self.words if w in data), None)


class _ScalerHeirs(_NamesNearby):
    """The project classes that build an enabled GradScaler in ``self.<attr>``: a
    screened-out file that names one of them may define a subclass that checkpoints without
    the scaler it inherits (AMP301), itself or through a saver it hands the optimizer."""

    @classmethod
    def of(cls, index, summaries) -> "_ScalerHeirs | None":
        names, paths = set(), set()
        for path, s in summaries.items():
            for qual, fact in s.classes.items():
                if fact.scaler_attrs and "." not in qual:
                    names.add(qual)
                    paths.add(path)
        return cls(index, names, paths) if names else None

    def search(self, data: bytes):
        return next((w for w in self.words if w in data), None)


class _HelperUsers(_NamesNearby):
    """The project's scaler factories and autocast wrappers (functions that return a
    GradScaler or an autocast context): which screened-out files can use one of them."""

    def __init__(self, index, names: dict[str, set[str]]):
        import re

        super().__init__(index, {n for ns in names.values() for n in ns}, names)
        self.pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(w) for w in self.words) + rb")\b")

    def search(self, data: bytes):
        # one memchr-speed scan per name first: the alternation regex runs at ~20 MB/s
        if not any(w in data for w in self.words):
            return None
        return self.pattern.search(data)


def _users_of(index, summaries) -> _HelperUsers | None:
    """The names of the project's AMP helpers that make a file AMP code without its tokens
    (``scaler = create_grad_scaler()``): a file the byte screen dropped that may import one and
    names it is analysed too."""
    names: dict[str, set[str]] = {}
    for path, s in summaries.items():
        for qual, f in s.functions.items():
            if "." in qual or qual.startswith("<") or not f.returns:
                continue  # scaler factories and autocast wrappers make a file AMP code without its tokens
            if len(qual) >= 6 or "_" in qual:
                names.setdefault(path, set()).add(qual)
    if not names:
        return None
    return _HelperUsers(index, names)


_CALL_WORDS = ("save", "ckpt", "checkpoint", "scaler", "autocast", "amp", "precision", "backward", "clip",
               "optimizer_step", "optimiser_step", "step_optim")


def _call_words(low: str) -> bool:
    """CALL_WORDS on lower-case ASCII: one of the words, or "state" not right after "load_"."""
    if any(w in low for w in _CALL_WORDS):
        return True
    i = low.find("state")
    while i != -1:
        if low[max(0, i - 5) : i] != "load_":
            return True
        i = low.find("state", i + 1)
    return False


CALL_WORDS = ascii_fast(r"save|ckpt|checkpoint|(?<!load_)state|scaler|autocast|amp|precision|backward|clip|optimi[sz]er_step|step_optim",
                        _call_words)


def _calls_out(index, r: FileResult) -> bool:
    """Does a function of ``r`` call a function of another project file that does something
    AMP rules care about?"""
    me = absolute(r.path)
    for f in r.summary.functions.values():
        for c in f.calls:
            if not (c.in_autocast or c.dict_args or CALL_WORDS.search(c.callee.rsplit(".", 1)[-1])):
                continue  # nothing a rule would ask the callee about
            hit = index.resolve_call(r.path, c, f.cls)
            if hit is not None and hit[0] != me and hit[1].interesting:
                return True
    for q, fact in r.summary.classes.items():
        if not fact.bases:
            continue
        if fact.methods and index.inherited_scaler_attrs(r.path, q) and any(
                (f := r.summary.function(f"{q}.{m}")) is not None and (f.saves or f.returns_state) for m in fact.methods):
            return True  # a subclass saving checkpoints while a base class builds the scaler (AMP301)
        if index.inherited_autocast_calls(r.path, q):
            return True  # a base class in another file calls one of its methods under autocast (AMP002)
        if fact.scaler_attrs and "__init__" in fact.methods and (hit := index.base_init(r.path, q)) is not None and hit[0] != me:
            ops = index.facts(*hit).self_ops
            if any("load" in ops.get(f"self.{a}", ()) for a in fact.scaler_attrs):
                return True  # the base's __init__ restores a scaler this class builds again (AMP302)
    return False


def _returns_own_state(summary) -> bool:
    """Does a class of the file build a GradScaler in ``self.<attr>`` and have a method that
    returns ``self.<optimizer>.state_dict()`` in a dict with nothing scaler-like? AMP301 asks
    the project whether another file may keep that scaler's state."""
    for q, fact in summary.classes.items():
        if not fact.scaler_attrs:
            continue
        for name in fact.methods:
            f = summary.function(f"{q}.{name}")
            st = f.returns_state if f is not None else None
            if st is not None and st.has_opt and not st.has_scaler and any(p.startswith("self.") for p in st.opt_params):
                return True
    return False


def _reanalyse(r: FileResult, index, only_if=None) -> FileResult:
    from amplint.analyze import analyze_text
    from amplint.source import SourceError, read_source

    if r.path.endswith(".ipynb"):  # the code cells, joined, with the index
        from amplint.notebook import analyze_notebook_bytes

        try:
            with open(r.path, "rb") as fh:
                data = fh.read()
        except OSError:
            return r
        if only_if is not None and only_if.search(data) is None:
            return r
        return analyze_notebook_bytes(data, r.path, index=index)
    try:
        src = read_source(r.path)
    except SourceError:
        return r
    if only_if is not None and only_if.search(src.data) is None:
        return r
    return analyze_text(src.text, r.path, index=index)


def applicable(d: Diagnostic, unsafe: bool) -> bool:
    """Would ``amplint fix`` apply this finding's fix with these flags?"""
    return d.fix is not None and (d.fix.applicability == "safe" or (unsafe and d.fix.applicability == "unsafe"))


_ERROR_NAMES = {"E902": "io-error", "AMP901": "timeout"}


def file_messages(r: FileResult, filt: Filter, unsafe: bool, text_cache: dict, lines: list[str] | None = None) -> list[Message]:
    """The reported messages of one file: its errors, then its selected, un-noqa'd findings."""
    from amplint.rule_table import RULES as ALL_RULES, severity_of

    promote = filt.settings.warnings_as_errors
    out = [
        Message(r.path, e.code, e.message, e.row, e.col, e.row, e.col, is_error=True,
                name="internal-error" if e.internal else _ERROR_NAMES.get(e.code, "syntax-error"),
                severity=severity_of(e.code, promote))
        for e in r.errors
    ]
    for d in r.diagnostics:
        if d.code not in filt.enabled:
            continue
        if lines is None:
            lines = _lines_of(r.path, text_cache)
        if not filt.keep(r.path, d, lines):
            continue
        rule = ALL_RULES.get(d.code)
        out.append(
            Message(
                r.path, d.code, d.message, d.row, d.col, d.end_row, d.end_col, d.fix,
                url=rule.url if rule else None, name=rule.name if rule else None,
                source_line=lines[d.row - 1] if lines and 0 < d.row <= len(lines) else None,
                noqa_row=d.stmt_row or d.row, applicable=applicable(d, unsafe),
                severity=severity_of(d.code, promote),
            )
        )
    return out


def _lines_of(path: str, text_cache: dict) -> list[str] | None:
    if path in text_cache:
        return text_cache[path]
    from amplint.source import SourceError, read_source, split_lines

    try:
        text = read_source(path).text
        if path.endswith(".ipynb"):  # a notebook's rows count lines of its joined code cells
            from amplint.notebook import virtual_text

            text = virtual_text(text, path)
        lines = split_lines(text)
    except SourceError:
        lines = None
    text_cache[path] = lines
    return lines


def _report(messages: list[Message], summary: Summary, opts: Options) -> None:
    fmt = opts.output_format
    if fmt in ("json", "json-lines", "sarif", "gitlab") and any(m.fix for m in messages):
        from amplint.fix.edits import attach_edits

        attach_edits(messages, opts.jobs)
    if any(m.path.endswith(".ipynb") for m in messages):  # rows -> (cell, row in cell)
        from amplint.notebook import translate_messages

        translate_messages(messages)
    if opts.statistics:
        from amplint.report.text import format_statistics

        text = format_statistics(messages, summary, fmt, show_summary=not opts.quiet)
    elif fmt in ("full", "concise"):
        text = formatter(fmt)(messages, summary, show_summary=not opts.quiet)
    else:
        text = formatter(fmt)(messages, summary)
    emit(text, opts.output_file)


def _run_stdin(opts: Options, settings: Settings, filt: Filter) -> int:
    from amplint.analyze import analyze_text
    from amplint.source import SourceError, decode, split_lines

    data = sys.stdin.buffer.read()
    name = display_path(opts.stdin_filename) if opts.stdin_filename else "-"
    if opts.force_exclude or settings.force_exclude:
        from amplint.discover import Excluder

        if opts.stdin_filename and Excluder(settings).excluded(opts.stdin_filename, False):
            if opts.fix:
                sys.stdout.buffer.write(data)
            return 0
    try:
        text, encoding = decode(data)
    except SourceError as exc:
        echo(f"{name}:1:1: E902 {exc}")
        return 1
    if opts.fix:
        from amplint.fix.apply import fix_text

        try:
            new, n, _ = fix_text(text, name, lambda d, lines: filt.keep(name, d, lines) and applicable(d, opts.unsafe_fixes))
        except Exception as exc:  # the fixer failed (e.g. recursion limit): echo the input unchanged
            echo(f"{name}: error: cannot fix: {type(exc).__name__}: {exc}; input left unchanged", err=True)
            new, n = text, 0
        sys.stdout.buffer.write(new.encode(encoding))
        result = analyze_text(new, name)
        remaining = [d for d in result.diagnostics if filt.keep(name, d, split_lines(new))]
        for e in result.errors:  # the buffer could not be checked: say so (stdout holds the code)
            echo(f"{name}:{e.row}:{e.col + 1}: error: {e.code} {e.message}", err=True)
        if any(e.internal for e in result.errors):
            return 2
        if opts.exit_zero:
            return 0
        return 1 if remaining or result.errors or (opts.exit_non_zero_on_fix and n) else 0
    result = analyze_text(text, name)
    messages = file_messages(result, filt, opts.unsafe_fixes, {}, lines=split_lines(text))
    fmt = opts.output_format
    summary = Summary(remaining_fixable=sum(m.applicable for m in messages), warnings_as_errors=settings.warnings_as_errors)
    if opts.statistics:
        from amplint.report.text import format_statistics

        text_out = format_statistics(messages, summary, fmt, show_summary=not opts.quiet)
    else:
        text_out = formatter(fmt)(messages, summary, show_summary=not opts.quiet) if fmt in ("full", "concise") else formatter(fmt)(messages, summary)
    emit(text_out, opts.output_file)
    if any(e.internal for e in result.errors):
        return 2
    return 0 if opts.exit_zero else (1 if messages else 0)
