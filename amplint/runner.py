"""Run the analysis over many files: cache look-ups, a process pool, deterministic order."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
import multiprocessing

from amplint.cache import Cache, content_hash
from amplint.diagnostics import FileError, FileResult
from amplint import engine
from amplint.engine import analyze_bytes

SERIAL_BELOW = 24  # files to analyse; below this a pool costs more than it saves


def _work(path: str, known_digest: str | None = None):
    """Read, screen and analyse one file in a worker. Returns (path, stat, digest, result);
    result is None when the content matches ``known_digest`` (cached: not re-analysed)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except OSError as exc:
        return path, None, None, FileResult(path, errors=[FileError("E902", exc.strerror or str(exc))])
    if os.path.isdir(path):
        return path, None, None, FileResult(path, errors=[FileError("E902", "Is a directory")])
    digest = content_hash(data)
    if known_digest == digest:
        return path, (st.st_mtime_ns, st.st_size), digest, None
    return path, (st.st_mtime_ns, st.st_size), digest, analyze_bytes(data, path)


def _work_chunk(items):
    return [_work(p, d) for p, d in items]


def run(files: list[str], cache: Cache | None, jobs: int | None = None) -> list[FileResult]:
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
    jobs = jobs or os.cpu_count() or 1
    if len(todo) < SERIAL_BELOW or jobs == 1:
        outs = [_work(p, d) for p, d in todo]
    else:
        ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
        n = max(1, min(64, len(todo) // (jobs * 8)))
        chunks = [todo[i : i + n] for i in range(0, len(todo), n)]
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=ctx, initializer=engine.configure, initargs=(engine.TARGET_TORCH_VERSION,)
        ) as pool:
            outs = [o for chunk in pool.map(_work_chunk, chunks) for o in chunk]
    for path, stat, digest, result in outs:
        if cache is not None and stat is not None:
            if result is None:
                result = cache.lookup_hash(path, digest)
            if not any(e.internal for e in result.errors):
                cache.store(path, stat[0], stat[1], digest, result)
        results[path] = result
    if cache is not None:
        cache.save()
    return [results[p] for p in files]
