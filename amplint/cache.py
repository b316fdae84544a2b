"""Result cache under ``.amplint_cache/<version>/`` (ruff's model).

One cache file per project root and analysis settings. An entry is keyed by the file's
content hash; its (mtime, size) is a shortcut that lets an unchanged file skip even being
read. Entries hold every rule's raw findings, so selection, per-file-ignores and noqa are
applied afresh each run. Writes go through a temp file and an atomic rename, so
concurrent runs never see a torn cache (the last writer wins; entries stay valid).
"""

from __future__ import annotations

import os
import pickle

from amplint.fspath import absolute
from amplint import __version__

try:  # the module hashlib takes it from, without loading OpenSSL (a warm run is mostly start-up)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - other Pythons
    from hashlib import blake2b

# The layout of an entry; a change (2: FileResult's summary pickled on its own; 3: Lit and Ctx
# are Records; 4: Diagnostic.why; 5: SaveFact.state_params) starts a new cache file, so an older file is never read as this one.
FORMAT = 6

CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by amplint.\n"


def content_hash(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


class Cache:
    def __init__(self, cache_dir: str, root: str, fingerprint: str):
        self.dir = os.path.join(cache_dir, __version__)
        key = blake2b(f"{os.path.abspath(root)}|{fingerprint}|format={FORMAT}".encode(), digest_size=12).hexdigest()
        self.path = os.path.join(self.dir, f"{key}.pickle")
        self.entries: dict[str, tuple] = {}
        self.dirty = False
        try:
            with open(self.path, "rb") as fh:
                data = pickle.load(fh)
            if isinstance(data, dict):
                self.entries = data
        except Exception:
            self.entries = {}

    def lookup_stat(self, path: str, st: os.stat_result):
        e = self.entries.get(absolute(path))
        if e is not None and e[0] == st.st_mtime_ns and e[1] == st.st_size:
            return e[3]
        return None

    def digest_of(self, path: str) -> str | None:
        e = self.entries.get(absolute(path))
        return e[2] if e is not None else None

    def lookup_hash(self, path: str, digest: str):
        e = self.entries.get(absolute(path))
        if e is not None and e[2] == digest:
            return e[3]
        return None

    def store(self, path: str, mtime_ns: int, size: int, digest: str, result) -> None:
        self.entries[absolute(path)] = (mtime_ns, size, digest, result)
        self.dirty = True

    # ------------------------------------------------------------------ project mode
    # Phase 2 (the project index and the files re-analysed with it) depends on every file of
    # the project and on which of them are reported: keyed by both, its results are kept as
    # one entry, so a run in which no file changed skips it.
    _PROJECT = "\0project"

    def project_key(self, files: list[str], others: list[str], results: list, paths: list[str]) -> str | None:
        """The key of phase 2 for this run, or None when a file's content is not known by its
        digest (unreadable, timed out, an internal error: not cached)."""
        h = blake2b(digest_size=16)
        h.update(repr((len(files), list(paths))).encode())
        for p, r in zip([*files, *others], results):
            e = self.entries.get(absolute(p))
            if e is None or e[3] is not r:
                return None
            h.update(f"{p}\0{e[2]}\n".encode())
        return h.hexdigest()

    def project_results(self, key: str):
        """``[(position, FileResult)]``: the reported files phase 2 re-analysed, as stored under ``key``."""
        e = self.entries.get(self._PROJECT)
        return e[1] if e is not None and e[0] == key else None

    def store_project(self, key: str, changed: list) -> None:
        self.entries[self._PROJECT] = (key, changed)
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            os.makedirs(self.dir, exist_ok=True)
            tag = os.path.join(os.path.dirname(self.dir), "CACHEDIR.TAG")
            if not os.path.exists(tag):
                with open(tag, "w") as fh:
                    fh.write(CACHEDIR_TAG)
            gi = os.path.join(os.path.dirname(self.dir), ".gitignore")
            if not os.path.exists(gi):
                with open(gi, "w") as fh:
                    fh.write("# Automatically created by amplint.\n*\n")
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(self.entries, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only tree: run without a cache
