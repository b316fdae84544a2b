"""The edits of each fix as JSON/SARIF/GitLab report them (ruff's ``fix.edits`` layout)."""

from __future__ import annotations

import os

from amplint.report import Message


def _file_edits(item):
    """Edits for every fix of one file (worker side of _attach_edits)."""
    from amplint.fix.apply import edits_for

    text, fixes = item
    out = []
    for fix in fixes:
        try:
            out.append(edits_for(text, fix))
        except Exception:
            out.append([])
    return out


def attach_edits(messages: list[Message], jobs: int | None = None) -> None:
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
