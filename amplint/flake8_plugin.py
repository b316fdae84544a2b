"""flake8 plugin: ``flake8 --select AMP`` runs amplint's rules.

Registered as the ``flake8.extension`` entry point ``AMP``. flake8 injects ``tree``,
``filename`` and ``lines`` by parameter name. Positions follow flake8's convention: 1-based
lines and **0-based** columns (flake8 adds 1 when it prints), so ``flake8`` and
``amplint check`` print the same ``row:col``. TorchFix's plugin yields 1-based columns and
ends up one column to the right.

Only the rules amplint itself would run are reported: its defaults (no preview or opt-in
rules), or the ``[tool.amplint]`` selection of the nearest pyproject.toml, including its
``per-file-ignores``. ``# noqa`` comments are left to flake8. A file without AMP tokens is
not parsed again (amplint's byte screen), and one that is gets a single ``ast`` parse.
"""

from __future__ import annotations

import os
from typing import Iterator

from amplint import __version__

_SETTINGS_CACHE: dict[str | None, tuple] = {}


def _settings_for(filename: str):
    """(settings, enabled codes) for a file: the nearest [tool.amplint], else the defaults."""
    from amplint.selection import enabled_codes
    from amplint.settings import ConfigError, Settings, find_config, load_settings

    start = filename if filename not in ("", "-", "stdin") and os.path.exists(filename) else os.getcwd()
    try:
        cfg = find_config(start)
    except ConfigError:
        cfg = None
    if cfg not in _SETTINGS_CACHE:
        try:
            settings = load_settings(cfg)
            enabled = enabled_codes(settings, cfg or "settings")
        except ConfigError:
            settings = Settings()
            enabled = enabled_codes(settings)
        _SETTINGS_CACHE[cfg] = (settings, enabled)
    return _SETTINGS_CACHE[cfg]


class AmplintChecker:
    name = "amplint"
    version = __version__

    def __init__(self, tree, filename: str, lines: list[str]):
        self.tree = tree  # flake8's tree; amplint needs its own model built from the text
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from amplint.screen import may_contain_amp

        text = "".join(self.lines)
        if not may_contain_amp(text.encode("utf-8", "surrogatepass")):
            return
        from amplint.analyze import analyze_text
        from amplint.selection import ignored_for_file

        settings, enabled = _settings_for(self.filename)
        ignored = ignored_for_file(settings, self.filename)
        result = analyze_text(text, self.filename)
        for d in result.diagnostics:
            if d.code in enabled and d.code not in ignored:
                yield d.row, d.col, f"{d.code} {d.message}", type(self)
