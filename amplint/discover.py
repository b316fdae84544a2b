"""Paths -> the files to check, honouring .gitignore, exclude and extend-exclude."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pathspec

from amplint.settings import Settings

SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Discovered:
    files: list[str]
    missing: list[str]  # paths given on the command line that do not exist


def _spec(patterns) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


def _rel(path: str, root: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:  # different drive (Windows)
        return path
    return rel.replace(os.sep, "/")


class Excluder:
    def __init__(self, settings: Settings):
        self.root = settings.root
        self.spec = _spec([*settings.exclude, *settings.extend_exclude])

    def excluded(self, path: str, is_dir: bool) -> bool:
        rel = _rel(path, self.root)
        name = os.path.basename(path)
        suffix = "/" if is_dir else ""
        if rel.startswith("../"):
            return self.spec.match_file(name + suffix)
        return self.spec.match_file(rel + suffix) or self.spec.match_file(name + suffix)


def discover(paths: list[str], settings: Settings, suffixes=SUFFIXES) -> Discovered:
    ex = Excluder(settings)
    files: list[str] = []
    missing: list[str] = []
    seen: set[str] = set()
    for p in paths:
        if os.path.isdir(p):
            _walk(p, ex, settings.respect_gitignore, files, seen, suffixes, [])
        elif os.path.lexists(p):
            if settings.force_exclude and ex.excluded(p, False):
                continue
            real = os.path.abspath(p)
            if real not in seen:
                seen.add(real)
                files.append(p)
        else:
            missing.append(p)
    return Discovered(files, missing)


def _gitignore(d: str) -> pathspec.PathSpec | None:
    gi = os.path.join(d, ".gitignore")
    try:
        with open(gi, encoding="utf-8", errors="replace") as fh:
            return pathspec.GitIgnoreSpec.from_lines(fh)
    except OSError:
        return None


def _ignored(path: str, is_dir: bool, stack) -> bool:
    for base, spec in stack:
        rel = _rel(path, base)
        if spec.match_file(rel + ("/" if is_dir else "")):
            return True
    return False


def _walk(d, ex, use_gitignore, files, seen, suffixes, stack) -> None:
    real = os.path.realpath(d)
    if real in seen:  # symlink loops
        return
    seen.add(real)
    if use_gitignore:
        spec = _gitignore(d)
        if spec is not None:
            stack = [*stack, (os.path.abspath(d), spec)]
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = entry.path
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if ex.excluded(path, is_dir) or (stack and _ignored(path, is_dir, stack)):
            continue
        if is_dir:
            _walk(path, ex, use_gitignore, files, seen, suffixes, stack)
        elif entry.name.endswith(suffixes):
            files.append(path)
