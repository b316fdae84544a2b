"""Run the analysis over many files: cache look-ups, a process pool, deterministic order."""

from __future__ import annotations

import os
import stat as stat_mod

TYPE_CHECKING = False  # typing is not imported on the check path

# concurrent.futures, multiprocessing and hashlib load only when a run needs them: a
# one-file `amplint check --no-cache` (pre-commit's case) pays for neither (issue 8).
if TYPE_CHECKING:
    from amplint.cache import Cache
from amplint.diagnostics import FileError, FileResult
from amplint.screen import may_hold_scaler_state, may_restore_optimizer

# the analysis engine (amplint.analyze: parse, model) loads when a file needs analysing, so
# a warm-cache run that analyses nothing does not pay for importing it

SERIAL_BELOW = 24  # files to analyse; below this a pool costs more than it saves


DEFAULT_PER_FILE_TIMEOUT = 30.0  # seconds; `--per-file-timeout`, 0 disables


class _Timeout(BaseException):  # not an Exception: the engine's per-rule containment must not catch it
    pass


def _on_alarm(signum, frame):
    raise _Timeout


def _analyze_within(data: bytes, path: str, timeout: float | None) -> FileResult:
    """analyze_bytes under a per-file time budget (SIGALRM; POSIX main thread only). A budget
    cannot interrupt one long C call (the parse itself), only the model and the rules."""
    from amplint.analyze import analyze_bytes, load_rules
    from amplint.screen import may_contain_amp

    if not may_contain_amp(data):  # most files: no timer, no signal handler (issue 8)
        return FileResult(path)
    load_rules()  # outside the budget
    # only when a file is analysed (a warm run analyses none); the C module, as signal.py builds
    # its enums on import (~3.5M instructions, 2% of a one-file run). The same calls: the old
    # handler comes back as a plain int or function (not an enum) and is restored as such.
    try:
        import _signal as signal
    except ImportError:  # pragma: no cover - not CPython
        import signal

    if not timeout or timeout <= 0 or not hasattr(signal, "setitimer"):
        return analyze_bytes(data, path)
    try:
        old = signal.signal(signal.SIGALRM, _on_alarm)
    except ValueError:  # not the main thread (an editor's worker thread): no budget
        return analyze_bytes(data, path)
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            return analyze_bytes(data, path)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        return FileResult(path, errors=[FileError("AMP901", f"timeout: analysis took longer than {timeout:g} s (see --per-file-timeout)")])
    finally:
        signal.signal(signal.SIGALRM, old)


def _work(path: str, known_digest: str | None = None, timeout: float | None = None, hash_it: bool = True):
    """Read, screen and analyse one file in a worker. Returns (path, stat, digest, result);
    result is None when the content matches ``known_digest`` (cached: not re-analysed)."""
    try:
        # O_NONBLOCK: a FIFO named x.py must not block the run; only regular files are read
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat_mod.S_ISDIR(st.st_mode):
                return path, None, None, FileResult(path, errors=[FileError("E902", "Is a directory")])
            if not stat_mod.S_ISREG(st.st_mode):
                return path, None, None, FileResult(path, errors=[FileError("E902", "Not a regular file")])
            data = fh.read()
    except OSError as exc:
        return path, None, None, FileResult(path, errors=[FileError("E902", exc.strerror or str(exc))])
    if hash_it:
        from amplint.cache import content_hash

        digest = content_hash(data)
    else:
        digest = None  # --no-cache: nothing to key
    if known_digest is not None and known_digest == digest:
        return path, (st.st_mtime_ns, st.st_size), digest, None
    result = _analyze_within(data, path, timeout)
    from amplint import screen

    if screen.CHECKPOINTS:  # else left True (may): no rule asks
        result.restores = may_restore_optimizer(data)
        result.scaler_state = may_hold_scaler_state(data)
    return path, (st.st_mtime_ns, st.st_size), digest, result


def _work_safe(path: str, known_digest: str | None = None, timeout: float | None = None, hash_it: bool = True):
    try:
        return _work(path, known_digest, timeout, hash_it)
    except Exception as exc:  # e.g. MemoryError outside the engine's per-rule containment
        from amplint.analyze import _internal

        return path, None, None, FileResult(path, errors=[_internal("worker", exc)])


def _work_chunk(items, timeout: float | None = None, hash_it: bool = True):
    return [_work_safe(p, d, timeout, hash_it) for p, d in items]


def _isolated(items, timeout, ctx) -> list:
    """A worker process died (killed, out of memory, a crash in C) and took the pool with it:
    re-run the files it left unfinished one per process, so only the file that kills a worker
    is reported (AMP900) and every other file is still checked."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from amplint.analyze import BUG_HINT

    outs = []
    for p, d in items:
        try:
            with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                outs.append(pool.submit(_work_safe, p, d, timeout).result())
        except BrokenProcessPool:
            msg = f"internal error: the worker process checking this file died ({BUG_HINT})"
            outs.append((p, None, None, FileResult(p, errors=[FileError("AMP900", msg, internal=True)])))
    return outs


def run(files: list[str], cache: Cache | None, jobs: int | None = None, timeout: float | None = DEFAULT_PER_FILE_TIMEOUT,
        target_torch_version: str | None = None, rule_codes=None, save: bool = True) -> list[FileResult]:
    """Every file's result, in order. ``target_torch_version`` and ``rule_codes`` (the rules
    to run; None: all): configure the engine with them before analysing anything (not at all
    when every file is a cache hit). ``save``: write the cache at the end (else the caller does)."""
    results: dict[str, FileResult] = {}
    todo: list[tuple[str, str | None]] = []
    for p in files:
        if cache is not None:
            try:
                st = os.stat(p)
            except OSError:
                todo.append((p, None))
                continue
            hit = cache.lookup_stat(p, st)
            if hit is not None:
                results[p] = hit
                continue
            todo.append((p, cache.digest_of(p)))
        else:
            todo.append((p, None))
    if todo and (target_torch_version is not None or rule_codes is not None):
        from amplint import analyze

        analyze.configure(target_torch_version, rule_codes)
    jobs = jobs or os.cpu_count() or 1
    if len(todo) < SERIAL_BELOW or jobs == 1:
        outs = [_work_safe(p, d, timeout, cache is not None) for p, d in todo]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        from amplint import analyze as engine

        ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
        # strided chunks: the files of one directory (a folder of 2,000-line training scripts)
        # spread over all chunks, so no worker is left with the heavy tail alone
        k = max(1, len(todo) // max(1, min(64, len(todo) // (jobs * 8))))
        chunks = [todo[i::k] for i in range(k)]
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=ctx, initializer=engine.configure, initargs=(engine.TARGET_TORCH_VERSION, engine.RULE_CODES)
        ) as pool:
            futures = [pool.submit(_work_chunk, chunk, timeout, cache is not None) for chunk in chunks]
            outs, lost = [], []
            for chunk, fut in zip(chunks, futures):
                try:
                    outs.extend(fut.result())
                except BrokenProcessPool:
                    lost.extend(chunk)
        if lost:
            outs.extend(_isolated(lost, timeout, ctx))
    for path, stat, digest, result in outs:
        if cache is not None and stat is not None:
            if result is None:
                result = cache.lookup_hash(path, digest)
            if not any(e.internal or e.code == "AMP901" for e in result.errors):
                cache.store(path, stat[0], stat[1], digest, result)
        results[path] = result
    if cache is not None and save:
        cache.save()
    return [results[p] for p in files]
