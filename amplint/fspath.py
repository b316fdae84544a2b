"""``absolute(path)``: ``os.path.abspath`` without its cost on the paths amplint handles
(tens of thousands per run in a large project: discovered ``./pkg/mod.py`` paths, cache keys,
module names, display paths). Only a path with ``.`` or ``..`` components or doubled
separators pays for ``normpath``."""

from __future__ import annotations

import os

_PINNED: str | None = None  # the working directory of the run in progress (pinned_cwd)


def cwd() -> str:
    """The working directory: read once per run while one is pinned, else from the OS."""
    return _PINNED if _PINNED is not None else os.getcwd()


class pinned_cwd:
    """For the length of one check or fix run (amplint never changes directory while it runs),
    ``absolute`` and ``cwd`` read the working directory once instead of once per path
    (tens of thousands of ``getcwd`` calls, a tenth of a warm run on a large project)."""

    def __enter__(self):
        global _PINNED
        self._outer = _PINNED
        _PINNED = os.getcwd()
        return self

    def __exit__(self, *exc) -> None:
        global _PINNED
        _PINNED = self._outer


def absolute(path: str) -> str:
    if os.sep != "/" or not path:
        return os.path.abspath(path)
    if path[0] != "/":
        while path.startswith("./"):
            path = path[2:]
        here = _PINNED if _PINNED is not None else os.getcwd()
        path = here + "/" + path if path not in ("", ".") else here
    if "/." in path or "//" in path or path.endswith("/") and len(path) > 1:
        return os.path.normpath(path)
    return path
