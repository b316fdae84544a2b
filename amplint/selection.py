"""Which rule codes run: select/extend-select/ignore with prefix expansion (ruff's model)."""

from __future__ import annotations

import os

from amplint.diagnostics import Diagnostic
from amplint.noqa import FileDirectives, is_suppressed
from amplint.settings import ConfigError, Settings

# Codes reported for files that could not be checked; always on.
ERROR_CODES = {"E902", "E999", "AMP900", "AMP901"}


def _expand(prefix: str, codes: list[str], where: str) -> set[str]:
    p = prefix.strip().upper()
    if p == "ALL":
        return set(codes)
    hit = {c for c in codes if c.startswith(p)}
    if not hit:
        raise ConfigError(f"{where}: unknown rule selector `{prefix}` (see `amplint rules`)")
    return hit


def enabled_codes(settings: Settings, where: str = "settings") -> set[str]:
    from amplint.rule_table import RULES as ALL_RULES

    codes = list(ALL_RULES)
    if settings.select is None:
        chosen = {c for c, r in ALL_RULES.items() if r.default}
        exact: set[str] = set()
    else:
        chosen = set()
        exact = set()
        every = False
        for s in settings.select:
            chosen |= _expand(s, codes, where)
            if s.strip().upper() in ALL_RULES:
                exact.add(s.strip().upper())
            every = every or s.strip().upper() == "ALL"
        # prefix selections do not switch on opt-in rules; exact codes and ALL (as in ruff:
        # every rule) do. Preview rules still need preview mode (below).
        chosen = {c for c in chosen if ALL_RULES[c].default or c in exact or every}
    for s in settings.extend_select:
        chosen |= _expand(s, codes, where)
        if s.strip().upper() in ALL_RULES:
            exact.add(s.strip().upper())
    for s in settings.ignore:
        chosen -= _expand(s, codes, where)
    # preview rules need preview mode unless selected by their exact code
    return {c for c in chosen if not ALL_RULES[c].preview or settings.preview or c in exact}


def validate_per_file_ignores(settings: Settings) -> None:
    from amplint.rule_table import RULES as ALL_RULES

    for pattern, sel in settings.per_file_ignores:
        for s in sel:
            _expand(s, list(ALL_RULES), f"per-file-ignores `{pattern}`")


def ignored_for_file(settings: Settings, path: str) -> set[str]:
    from amplint.rule_table import RULES as ALL_RULES

    if not settings.per_file_ignores:
        return set()
    try:
        rel = os.path.relpath(os.path.abspath(path), settings.root).replace(os.sep, "/")
    except ValueError:
        rel = path
    import fnmatch  # only with per-file-ignores (start-up)

    name = os.path.basename(path)
    out: set[str] = set()
    for pattern, sel in settings.per_file_ignores:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        matched = fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(rel, pat.rstrip("/") + "/*")
        if matched != negate:
            for s in sel:
                out |= _expand(s, list(ALL_RULES), f"per-file-ignores `{pattern}`")
    return out


class Filter:
    """Which findings of a file are reported: enabled, not ignored for the file, not noqa'd
    (on the line, or file-wide by `# amplint: noqa`). The first time it reads a file's lines
    it warns, once per file on stderr, about unknown AMP codes in its noqa comments."""

    def __init__(self, settings: Settings, enabled: set[str]):
        self.settings = settings
        self.enabled = enabled
        self._directives: dict[str, tuple[list[str], FileDirectives]] = {}
        self._warned: set[str] = set()

    def directives(self, path: str, lines: list[str]) -> FileDirectives:
        seen = self._directives.get(path)
        if seen is not None and seen[0] is lines:
            return seen[1]
        fd = FileDirectives(lines)
        self._directives[path] = (lines, fd)
        if path not in self._warned:
            self._warned.add(path)
            from amplint.rule_table import RULES as ALL_RULES

            unknown = fd.unknown(set(ALL_RULES) | ERROR_CODES)
            if unknown:
                import sys

                listed = ", ".join(f"`{c}` (line {row})" for row, c in unknown)
                s = "s" if len(unknown) != 1 else ""
                print(f"warning: {path}: unknown rule code{s} in `# noqa`: {listed} (see `amplint rules`)", file=sys.stderr)
        return fd

    def keep(self, path: str, d: Diagnostic, lines: list[str] | None) -> bool:
        if d.code not in self.enabled:
            return False
        if d.code in ignored_for_file(self.settings, path):
            return False
        if lines is not None:
            if self.directives(path, lines).exempts(d.code):
                return False
            if is_suppressed(lines, d.code, [d.row, d.stmt_row]):
                return False
        return True
