"""Fix files on disk (or show the diff), never losing a byte."""

from __future__ import annotations

from amplint.diagnostics import FileError, FileResult
from amplint.report import Message
from amplint.source import split_lines


def fix_files(results: list[FileResult], opts, filt, text_cache):
    """Returns (new results, number fixed, diffs, messages for files that could not be written)."""
    from amplint.analyze import analyze_text
    from amplint.fix.apply import CannotFix, fix_text, unified_diff
    from amplint.source import ChangedOnDisk, ReadOnly, SourceError, atomic_write

    out: list[FileResult] = []
    fixed_total = 0
    diffs: list[str] = []
    failures: list[Message] = []
    precomputed = {} if opts.add_noqa else _fix_in_parallel(results, opts, filt)
    for r in results:
        if r.errors or not r.diagnostics:
            out.append(r)
            continue
        loaded = _load(r)
        if isinstance(loaded, FileResult):
            out.append(loaded)
            continue
        src, nb = loaded
        if nb is not None:
            from amplint.notebook import NotebookError
        want = _wanted(r.path, opts, filt)

        if opts.add_noqa:
            new_text, n = _add_noqa(src.text, r, filt)
        else:
            if not any(want(d, split_lines(src.text)) for d in r.diagnostics):
                out.append(r)
                continue
            try:
                if r.path in precomputed and precomputed[r.path][0] == src.text:
                    _text, kind, value = precomputed[r.path]
                    if kind == "exc":
                        raise value
                    new_text, n, converged = value
                else:
                    new_text, n, converged = fix_text(src.text, r.path, want)
            except CannotFix as exc:
                failures.append(Message(r.path, "E999", f"cannot fix: {exc}; left untouched", 1, 0, 1, 0, is_error=True, name="syntax-error"))
                out.append(r)
                continue
            except RecursionError:
                # legal code nested deeper than LibCST's recursive visitors can go: leave it alone
                failures.append(Message(r.path, "E999", "cannot fix: too deeply nested for the fixer (recursion limit); left untouched", 1, 0, 1, 0, is_error=True, name="syntax-error"))
                out.append(r)
                continue
            except Exception as exc:  # an internal error in the fixer: contain it to this file
                from amplint.analyze import _internal

                err = _internal("fixer", exc)
                out.append(FileResult(r.path, r.diagnostics, [*r.errors, err]))
                continue
            if not converged:
                import click

                click.echo(f"warning: {r.path}: fixes did not converge after 10 passes; some findings were left unfixed", err=True)
        if new_text == src.text:
            out.append(r)
            continue
        if opts.diff:
            diffs.append(nb.diff(new_text) if nb is not None else unified_diff(r.path, src.text, new_text))
            fixed_total += n
            out.append(r)
            continue
        if nb is not None:
            try:
                src, file_text = nb.file_source, nb.render(new_text)
            except NotebookError as exc:
                failures.append(Message(r.path, "E902", f"cannot write fixes: {exc}", 1, 0, 1, 0, is_error=True))
                out.append(r)
                continue
        try:
            atomic_write(src, file_text if nb is not None else new_text)
        except ReadOnly as exc:
            failures.append(Message(r.path, "E902", str(exc), 1, 0, 1, 0, is_error=True, name="io-error"))
            out.append(r)
            continue
        except ChangedOnDisk:
            failures.append(Message(r.path, "E902", "file changed on disk while fixing; left untouched", 1, 0, 1, 0, is_error=True))
            out.append(r)
            continue
        except (SourceError, OSError, UnicodeError) as exc:
            failures.append(Message(r.path, "E902", f"cannot write fixes: {getattr(exc, 'strerror', None) or exc}", 1, 0, 1, 0, is_error=True))
            out.append(r)
            continue
        fixed_total += n
        text_cache[r.path] = split_lines(new_text)
        out.append(analyze_text(new_text, r.path))
    return out, fixed_total, diffs, failures


def _load(r: FileResult):
    """(source to fix, notebook or None), or a FileResult to report instead."""
    from amplint.source import SourceError, read_source

    try:
        src = read_source(r.path)
    except SourceError as exc:
        return FileResult(r.path, errors=[FileError("E902", str(exc))])
    nb = None
    if r.path.endswith(".ipynb"):  # fix the joined code cells; write back only changed cells
        from amplint.notebook import NotebookError, load_notebook

        try:
            nb = load_notebook(src.text, r.path)
        except NotebookError as exc:
            return FileResult(r.path, errors=[FileError("E902", str(exc))])
        if nb is None:
            return r
        src = nb.as_source(src)
    return src, nb


def _wanted(path: str, opts, filt):
    """Which findings of ``path`` to fix: applicable with the flags, selected, not noqa'd."""

    def want(d, lines):
        if d.fix is None or d.fix.applicability == "display-only":
            return False
        if d.fix.applicability == "unsafe" and not opts.unsafe_fixes:
            return False
        return filt.keep(path, d, lines)

    return want


_POOL_CTX = None  # (opts, filt) for forked fix workers
PARALLEL_FIX_MIN = 4


def _fix_worker(item):
    from amplint.fix.apply import fix_text

    path, text = item
    opts, filt = _POOL_CTX
    try:
        return path, (text, "ok", fix_text(text, path, _wanted(path, opts, filt)))
    except Exception as exc:  # re-raised in the main process, where errors are reported
        return path, (text, "exc", exc)


def _fix_in_parallel(results, opts, filt) -> dict:
    """Run the LibCST fixing (the expensive part) of several files in a process pool;
    reading, writing and reporting stay in the main process, in order."""
    import os

    jobs = getattr(opts, "jobs", None) or os.cpu_count() or 1
    if jobs == 1 or not hasattr(os, "fork"):
        return {}
    items = []
    for r in results:
        if r.errors or not r.diagnostics:
            continue
        loaded = _load(r)
        if isinstance(loaded, FileResult):
            continue
        src, _nb = loaded
        want = _wanted(r.path, opts, filt)
        lines = split_lines(src.text)
        if any(want(d, lines) for d in r.diagnostics):
            items.append((r.path, src.text))
    if len(items) < PARALLEL_FIX_MIN:
        return {}
    global _POOL_CTX
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _POOL_CTX = (opts, filt)
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=multiprocessing.get_context("fork")) as pool:
            return dict(pool.map(_fix_worker, items, chunksize=1))
    except Exception:  # a pool that cannot start or pickle: fall back to fixing in this process
        return {}
    finally:
        _POOL_CTX = None


def _add_noqa(text: str, r: FileResult, filt) -> tuple[str, int]:
    lines = split_lines(text)
    per_row: dict[int, set[str]] = {}
    unsafe: set[int] | None = None
    for d in r.diagnostics:
        if not filt.keep(r.path, d, lines):
            continue
        # the statement's first line, unless a comment cannot go there (its end is inside a
        # multi-line string, or it ends with a backslash continuation): then the flagged line
        if unsafe is None:
            unsafe = _comment_unsafe_rows(text, lines)
        row = next((x for x in (d.stmt_row, d.row) if x and x not in unsafe), None)
        if row is None:
            continue
        per_row.setdefault(row, set()).add(d.code)
    from amplint.noqa import NOQA, noqa_codes

    n = 0
    for row, codes in per_row.items():
        line = lines[row - 1]
        body = line.rstrip("\r\n")
        nl = line[len(body):]
        existing = noqa_codes(body)
        if existing is not None:
            if not existing:
                continue
            merged = ", ".join(sorted(existing | codes))
            body = NOQA.sub(f"# noqa: {merged}", body, count=1)
        else:
            body = f"{body}  # noqa: {', '.join(sorted(codes))}"
        lines[row - 1] = body + nl
        n += len(codes)
    return "".join(lines), n


def _comment_unsafe_rows(text: str, lines: list[str]) -> set[int]:
    """Rows whose end a `# noqa` comment cannot be appended to: inside a token that spans
    lines (a triple-quoted string), or ending with a backslash continuation."""
    import io
    import tokenize

    unsafe = {i for i, line in enumerate(lines, 1) if line.rstrip("\r\n").endswith("\\")}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.end[0] > tok.start[0]:
                unsafe.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return unsafe
