"""``absolute(path)``: ``os.path.abspath`` without its cost on the paths amplint handles
(tens of thousands per run in a large project: discovered ``./pkg/mod.py`` paths, cache keys,
module names, display paths). Only a path with ``.`` or ``..`` components or doubled
separators pays for ``normpath``."""

from __future__ import annotations

import os


def absolute(path: str) -> str:
    if os.sep != "/" or not path:
        return os.path.abspath(path)
    if path[0] != "/":
        while path.startswith("./"):
            path = path[2:]
        path = os.getcwd() + "/" + path if path not in ("", ".") else os.getcwd()
    if "/." in path or "//" in path or path.endswith("/") and len(path) > 1:
        return os.path.normpath(path)
    return path
