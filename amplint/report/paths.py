"""Paths as CI tools want them: relative to the working directory, posix style."""

from __future__ import annotations

import os
from urllib.parse import quote

SRCROOT = "%SRCROOT%"


def relative(path: str) -> str:
    """``path`` relative to the working directory (CI runs from the repository root), posix style."""
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive (Windows)
            return path.replace(os.sep, "/")
        if not rel.startswith(".."):
            path = rel
    return path.replace(os.sep, "/")


def artifact_uri(path: str) -> tuple[str, str | None]:
    """(uri, uriBaseId) for a SARIF artifactLocation."""
    rel = relative(path)
    if os.path.isabs(rel):
        return "file://" + quote(rel if rel.startswith("/") else "/" + rel), None
    if rel.startswith("./"):
        rel = rel[2:]
    return quote(rel), SRCROOT
