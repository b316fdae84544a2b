"""The check/fix driver behind the CLI: settings -> files -> results -> fixes -> report."""

from __future__ import annotations

import os
import sys

import click

from amplint.diagnostics import Diagnostic, FileError, FileResult
from amplint.noqa import is_suppressed
from amplint.report import FORMATTERS, Message, Summary, format_statistics
from amplint.selection import ERROR_CODES, enabled_codes, ignored_for_file, validate_per_file_ignores
from amplint.settings import ConfigError, Settings, find_config, load_settings


class Options:
    """The command-line options of `check`/`fix` (see amplint.cli)."""

    paths: tuple[str, ...]
    fix: bool
    unsafe_fixes: bool
    diff: bool
    exit_zero: bool
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


def resolve_settings(opts: Options) -> Settings:
    if opts.isolated:
        settings = Settings()
    else:
        cfg = opts.config_path
        if cfg is not None and not os.path.isfile(cfg):
            raise ConfigError(f"config file not found: {cfg}")
        if cfg is None:
            start = next((p for p in opts.paths if p != "-"), None) or os.getcwd()
            if opts.stdin_filename and (not opts.paths or opts.paths == ("-",)):
                start = opts.stdin_filename
            start = os.path.abspath(start)
            while not os.path.exists(start) and os.path.dirname(start) != start:
                start = os.path.dirname(start)  # an unsaved editor buffer: its would-be directory
            cfg = find_config(start)
        settings = load_settings(cfg)
    changes: dict = {}
    if opts.select is not None:
        changes["select"] = opts.select
    if opts.extend_select:
        changes["extend_select"] = settings.extend_select + opts.extend_select
    if opts.ignore:
        changes["ignore"] = settings.ignore + opts.ignore
    if opts.preview is not None:
        changes["preview"] = opts.preview
    if opts.target_torch_version:
        from amplint.settings import _parse_version

        if not _parse_version(opts.target_torch_version):
            raise ConfigError(f"--target-torch-version: not a version: {opts.target_torch_version}")
        changes["target_torch_version"] = opts.target_torch_version
    if opts.cache_dir:
        changes["cache_dir"] = os.path.abspath(opts.cache_dir)
    if opts.force_exclude:
        changes["force_exclude"] = True
    return settings._replace(**changes) if changes else settings


def _applicable(d: Diagnostic, unsafe: bool) -> bool:
    return d.fix is not None and (d.fix.applicability == "safe" or (unsafe and d.fix.applicability == "unsafe"))


class Filter:
    def __init__(self, settings: Settings, enabled: set[str]):
        self.settings = settings
        self.enabled = enabled
        self._lines: dict[str, list[str]] = {}

    def keep(self, path: str, d: Diagnostic, lines: list[str] | None) -> bool:
        if d.code not in self.enabled:
            return False
        if d.code in ignored_for_file(self.settings, path):
            return False
        if lines is not None and is_suppressed(lines, d.code, [d.row, d.stmt_row]):
            return False
        return True


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


def run_check(opts: Options) -> int:
    try:
        settings = resolve_settings(opts)
        enabled = enabled_codes(settings, settings.config_path or "--select/--ignore")
        validate_per_file_ignores(settings)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    from amplint import engine

    engine.configure(settings.target_torch_version)

    from amplint.discover import discover

    paths = list(opts.paths) or ["."]
    if paths == ["-"]:
        return _run_stdin(opts, settings, enabled)
    found = discover(paths, settings)
    if opts.show_files:
        for f in found.files:
            click.echo(f)
        return 0

    cache = None
    if not opts.no_cache:
        from amplint.cache import Cache

        cache_dir = settings.cache_dir or os.path.join(settings.root, ".amplint_cache")
        cache = Cache(cache_dir, settings.root, settings.fingerprint())

    from amplint.runner import run

    if opts.per_file_timeout is None:
        results = run(found.files, cache, opts.jobs)
    else:
        results = run(found.files, cache, opts.jobs, timeout=opts.per_file_timeout)
    for p in found.missing:
        results.append(FileResult(p, errors=[FileError("E902", "No such file or directory")]))

    filt = Filter(settings, enabled)
    text_cache: dict[str, list[str] | None] = {}
    fixed_total = 0
    diffs: list[str] = []
    write_failures: list[Message] = []

    if opts.fix or opts.diff or opts.add_noqa:
        from amplint.fixer_driver import fix_files

        results, fixed_total, diffs, write_failures = fix_files(results, opts, filt, text_cache)
        if opts.add_noqa:
            click.echo(f"Added {fixed_total} noqa directive{'s' if fixed_total != 1 else ''}.", err=True)

    messages: list[Message] = []
    internal = False
    hidden_unsafe = 0
    remaining_fixable = 0
    from amplint.rules import ALL_RULES

    for r in results:
        lines = None
        for e in r.errors:
            internal = internal or e.internal
            messages.append(
                Message(r.path, e.code, e.message, e.row, e.col, e.row, e.col, is_error=True, name="internal-error" if e.internal else ("io-error" if e.code == "E902" else ("timeout" if e.code == "AMP901" else "syntax-error")))
            )
        for d in r.diagnostics:
            if d.code not in enabled:
                continue
            if lines is None:
                lines = _lines_of(r.path, text_cache)
            if not filt.keep(r.path, d, lines):
                continue
            rule = ALL_RULES.get(d.code)
            applicable = _applicable(d, opts.unsafe_fixes)
            if applicable:
                remaining_fixable += 1
            elif d.fix is not None and d.fix.applicability == "unsafe":
                hidden_unsafe += 1
            messages.append(
                Message(
                    r.path, d.code, d.message, d.row, d.col, d.end_row, d.end_col, d.fix,
                    url=rule.url if rule else None, name=rule.name if rule else None,
                    source_line=lines[d.row - 1] if lines and 0 < d.row <= len(lines) else None,
                    noqa_row=d.stmt_row or d.row, applicable=applicable,
                )
            )
    messages.extend(write_failures)
    messages.sort(key=lambda m: (m.path, m.row, m.col, m.code))

    fmt = opts.output_format
    summary = Summary(fixed=fixed_total, remaining_fixable=remaining_fixable, hidden_unsafe=hidden_unsafe, files=len(found.files), fix_mode=opts.fix)

    if fmt in ("json", "json-lines", "sarif", "gitlab") and any(m.fix for m in messages):
        _attach_edits(messages, opts.jobs)
    if any(m.path.endswith(".ipynb") for m in messages):  # rows -> (cell, row in cell)
        from amplint.notebook import translate_messages

        translate_messages(messages)

    out_stream = None
    if opts.diff:
        text = "".join(diffs)
        _emit(text, opts.output_file)
        n = sum(1 for _ in diffs)
        if n:
            click.echo(f"Would fix {fixed_total} error{'s' if fixed_total != 1 else ''} in {n} file{'s' if n != 1 else ''}.", err=True)
        else:
            click.echo("No errors would be fixed.", err=True)
        if internal:
            return 2
        return 1 if diffs else 0

    if opts.statistics:
        text = format_statistics(messages)
    else:
        formatter = _formatter(fmt)
        if fmt in ("full", "concise"):
            text = formatter(messages, summary, show_summary=not opts.quiet)
        else:
            text = formatter(messages, summary)
    _emit(text, opts.output_file)
    del out_stream

    if fmt in ("full", "concise") and not opts.quiet:
        for m in messages:
            if m.is_error:
                click.echo(f"{m.path}: error: {m.message}", err=True)

    if internal:
        return 2
    if opts.exit_zero:
        return 0
    if opts.fix and opts.exit_non_zero_on_fix and fixed_total:
        return 1
    return 1 if messages else 0


def _formatter(fmt: str):
    if fmt in FORMATTERS:
        return FORMATTERS[fmt]
    try:
        from amplint import formats_extra

        return formats_extra.FORMATTERS[fmt]
    except (ImportError, KeyError):
        raise click.UsageError(f"output format `{fmt}` is not available")


def _emit(text: str, output_file: str | None) -> None:
    if output_file:
        try:
            d = os.path.dirname(os.path.abspath(output_file))
            os.makedirs(d, exist_ok=True)
            with open(output_file, "w", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(text)
        except OSError as exc:  # a usage problem, not a crash: exit 2 with the reason
            click.echo(f"error: cannot write the report to {output_file}: {exc.strerror or exc}", err=True)
            sys.exit(2)
    else:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `amplint check | head`: the reader left; keep the exit code
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def _file_edits(item):
    """Edits for every fix of one file (worker side of _attach_edits)."""
    from amplint.fixer import edits_for

    text, fixes = item
    out = []
    for fix in fixes:
        try:
            out.append(edits_for(text, fix))
        except Exception:
            out.append([])
    return out


def _attach_edits(messages: list[Message], jobs: int | None = None) -> None:
    """Fill ``Message.edits`` (JSON/SARIF/GitLab output): one LibCST pass per fix, run per
    file in a process pool when several files have fixes."""
    from amplint.source import SourceError, read_source

    by_path: dict[str, list[Message]] = {}
    for m in messages:
        if m.fix is not None:
            by_path.setdefault(m.path, []).append(m)
    items, owners = [], []
    for path, ms in by_path.items():
        try:
            text = read_source(path).text
            if path.endswith(".ipynb"):
                from amplint.notebook import virtual_text

                text = virtual_text(text, path)
        except SourceError:
            text = None
        if text is None:
            for m in ms:
                m.edits = []
            continue
        items.append((text, [m.fix for m in ms]))
        owners.append(ms)
    jobs = jobs or os.cpu_count() or 1
    results = None
    if len(items) >= 4 and jobs > 1 and hasattr(os, "fork"):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            with ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=multiprocessing.get_context("fork")) as pool:
                results = list(pool.map(_file_edits, items, chunksize=1))
        except Exception:
            results = None
    if results is None:
        results = [_file_edits(item) for item in items]
    for ms, edits in zip(owners, results):
        for m, e in zip(ms, edits):
            m.edits = e


def _run_stdin(opts: Options, settings: Settings, enabled: set[str]) -> int:
    from amplint.engine import analyze_text
    from amplint.source import SourceError, decode, split_lines

    data = sys.stdin.buffer.read()
    name = opts.stdin_filename or "-"
    if opts.force_exclude or settings.force_exclude:
        from amplint.discover import Excluder

        if opts.stdin_filename and Excluder(settings).excluded(opts.stdin_filename, False):
            if opts.fix:
                sys.stdout.buffer.write(data)
            return 0
    try:
        text, encoding = decode(data)
    except SourceError as exc:
        click.echo(f"{name}:1:1: E902 {exc}")
        return 1
    filt = Filter(settings, enabled)
    if opts.fix:
        from amplint.fixer import fix_text

        try:
            new, n, _ = fix_text(text, name, lambda d, lines: filt.keep(name, d, lines) and _applicable(d, opts.unsafe_fixes))
        except Exception as exc:  # the fixer failed (e.g. recursion limit): echo the input unchanged
            click.echo(f"{name}: error: cannot fix: {type(exc).__name__}: {exc}; input left unchanged", err=True)
            new, n = text, 0
        sys.stdout.buffer.write(new.encode(encoding))
        result = analyze_text(new, name)
        remaining = [d for d in result.diagnostics if filt.keep(name, d, split_lines(new))]
        for e in result.errors:  # the buffer could not be checked: say so (stdout holds the code)
            click.echo(f"{name}:{e.row}:{e.col + 1}: error: {e.code} {e.message}", err=True)
        if any(e.internal for e in result.errors):
            return 2
        if opts.exit_zero:
            return 0
        return 1 if remaining or result.errors or (opts.exit_non_zero_on_fix and n) else 0
    result = analyze_text(text, name)
    lines = split_lines(text)
    from amplint.rules import ALL_RULES

    messages = [
        Message(name, e.code, e.message, e.row, e.col, e.row, e.col, is_error=True) for e in result.errors
    ]
    for d in result.diagnostics:
        if filt.keep(name, d, lines):
            rule = ALL_RULES.get(d.code)
            messages.append(
                Message(name, d.code, d.message, d.row, d.col, d.end_row, d.end_col, d.fix,
                        url=rule.url if rule else None, name=rule.name if rule else None,
                        source_line=lines[d.row - 1] if 0 < d.row <= len(lines) else None,
                        noqa_row=d.stmt_row or d.row, applicable=_applicable(d, opts.unsafe_fixes))
            )
    fmt = opts.output_format
    formatter = _formatter(fmt)
    summary = Summary(remaining_fixable=sum(m.applicable for m in messages))
    text_out = formatter(messages, summary, show_summary=not opts.quiet) if fmt in ("full", "concise") else formatter(messages, summary)
    _emit(text_out, opts.output_file)
    if any(e.internal for e in result.errors):
        return 2
    return 0 if opts.exit_zero else (1 if messages else 0)
