"""``[tool.amplint]`` configuration and command-line flags, merged into one Settings."""

from __future__ import annotations

import os
import sys



def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
    ".vscode", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
    ".amplint_cache",
)

KNOWN_KEYS = {
    "select", "extend-select", "ignore", "exclude", "extend-exclude", "per-file-ignores", "preview",
    "target-torch-version", "cache-dir", "respect-gitignore", "force-exclude", "src", "warnings-as-errors",
}

DEFAULT_TARGET_TORCH = "2.4"


class ConfigError(Exception):
    pass


class Settings:
    """One immutable set of settings (from [tool.amplint] and the command line)."""

    __slots__ = (
        "select", "extend_select", "ignore", "exclude", "extend_exclude", "per_file_ignores", "preview",
        "target_torch_version", "cache_dir", "respect_gitignore", "force_exclude", "root", "config_path", "src",
        "warnings_as_errors",
    )

    def __init__(
        self,
        select: tuple[str, ...] | None = None,
        extend_select: tuple[str, ...] = (),
        ignore: tuple[str, ...] = (),
        exclude: tuple[str, ...] = DEFAULT_EXCLUDE,
        extend_exclude: tuple[str, ...] = (),
        per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = (),
        preview: bool = False,
        target_torch_version: str = DEFAULT_TARGET_TORCH,
        cache_dir: str | None = None,
        respect_gitignore: bool = True,
        force_exclude: bool = False,
        root: str | None = None,
        config_path: str | None = None,
        src: tuple[str, ...] = (".", "src"),
        warnings_as_errors: bool = False,  # report every warning-level finding as an error
    ):
        values = dict(locals())
        del values["self"]
        if values["root"] is None:
            values["root"] = os.getcwd()
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError("Settings is immutable; use _replace()")

    def _asdict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def _replace(self, **changes) -> "Settings":
        return Settings(**{**self._asdict(), **changes})

    def __eq__(self, other) -> bool:
        return isinstance(other, Settings) and self._asdict() == other._asdict()

    def __hash__(self) -> int:
        return hash(tuple(self._asdict().items()))

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self._asdict().items()) + ")"

    def fingerprint(self) -> str:
        """What the cached analysis depends on (selection and noqa are applied after)."""
        return f"torch={self.target_torch_version};preview={self.preview};src={','.join(self.src)}"


def find_config(start: str) -> str | None:
    """The nearest pyproject.toml (walking up from ``start``) with a [tool.amplint] table."""
    d = os.path.abspath(start)
    if os.path.isfile(d):
        d = os.path.dirname(d)
    while True:
        cand = os.path.join(d, "pyproject.toml")
        if os.path.isfile(cand):
            try:
                with open(cand, "rb") as fh:
                    raw = fh.read()
            except OSError as exc:
                raise ConfigError(f"{cand}: {exc}") from None
            # only parse a pyproject.toml that can hold [tool.amplint] (tomllib costs start-up)
            if b"amplint" in raw:
                try:
                    data = _toml().loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as exc:
                    raise ConfigError(f"{cand}: {exc}") from None
                if "amplint" in data.get("tool", {}):
                    return cand
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _str_list(path: str, key: str, value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: `{key}` must be a list of strings")
    return tuple(value)


def load_settings(config_path: str | None) -> Settings:
    if config_path is None:
        return Settings()
    try:
        with open(config_path, "rb") as fh:
            data = _toml().load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{config_path}: {exc}") from None
    table = data.get("tool", {}).get("amplint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path}: [tool.amplint] must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{config_path}: unknown key{'s' if len(unknown) > 1 else ''} in [tool.amplint]: "
            + ", ".join(f"`{k}`" for k in unknown)
            + f" (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    kw: dict = {"root": os.path.dirname(os.path.abspath(config_path)), "config_path": config_path}
    if "select" in table:
        kw["select"] = _str_list(config_path, "select", table["select"])
    if "extend-select" in table:
        kw["extend_select"] = _str_list(config_path, "extend-select", table["extend-select"])
    if "ignore" in table:
        kw["ignore"] = _str_list(config_path, "ignore", table["ignore"])
    if "exclude" in table:
        kw["exclude"] = _str_list(config_path, "exclude", table["exclude"])
    if "extend-exclude" in table:
        kw["extend_exclude"] = _str_list(config_path, "extend-exclude", table["extend-exclude"])
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{config_path}: `per-file-ignores` must be a table of pattern = [codes]")
        kw["per_file_ignores"] = tuple(
            (pat, _str_list(config_path, f"per-file-ignores.{pat}", codes)) for pat, codes in pfi.items()
        )
    for key, attr in (("preview", "preview"), ("respect-gitignore", "respect_gitignore"), ("force-exclude", "force_exclude"),
                      ("warnings-as-errors", "warnings_as_errors")):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{config_path}: `{key}` must be true or false")
            kw[attr] = table[key]
    if "target-torch-version" in table:
        v = table["target-torch-version"]
        if not isinstance(v, str) or not _parse_version(v):
            raise ConfigError(f"{config_path}: `target-torch-version` must be a version string such as \"2.4\"")
        kw["target_torch_version"] = v
    if "src" in table:
        kw["src"] = _str_list(config_path, "src", table["src"])
    if "cache-dir" in table:
        v = table["cache-dir"]
        if not isinstance(v, str):
            raise ConfigError(f"{config_path}: `cache-dir` must be a string")
        kw["cache_dir"] = os.path.join(kw["root"], v)
    return Settings(**kw)


def _parse_version(v: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in v.split(".")[:3])
    except ValueError:
        return None


def torch_at_least(settings: Settings, version: str) -> bool:
    have = _parse_version(settings.target_torch_version) or (0,)
    need = _parse_version(version) or (0,)
    return have >= need


def resolve(opts) -> Settings:
    """The settings of a run: the nearest [tool.amplint] (or --config, or none with
    --isolated), then the command-line flags on top."""
    if opts.isolated:
        settings = Settings()
    else:
        cfg = opts.config_path
        if cfg is not None and not os.path.isfile(cfg):
            raise ConfigError(f"config file not found: {cfg}")
        if cfg is None:
            start = next((p for p in opts.paths if p != "-"), None) or os.getcwd()
            if opts.stdin_filename and (not opts.paths or opts.paths == ("-",)):
                start = opts.stdin_filename
            start = os.path.abspath(start)
            while not os.path.exists(start) and os.path.dirname(start) != start:
                start = os.path.dirname(start)  # an unsaved editor buffer: its would-be directory
            cfg = find_config(start)
        settings = load_settings(cfg)
    changes: dict = {}
    if opts.select is not None:
        changes["select"] = opts.select
    if opts.extend_select:
        changes["extend_select"] = settings.extend_select + opts.extend_select
    if opts.ignore:
        changes["ignore"] = settings.ignore + opts.ignore
    if opts.preview is not None:
        changes["preview"] = opts.preview
    if opts.target_torch_version:
        if not _parse_version(opts.target_torch_version):
            raise ConfigError(f"--target-torch-version: not a version: {opts.target_torch_version}")
        changes["target_torch_version"] = opts.target_torch_version
    if opts.cache_dir:
        changes["cache_dir"] = os.path.abspath(opts.cache_dir)
    if opts.force_exclude:
        changes["force_exclude"] = True
    if getattr(opts, "warnings_as_errors", False):
        changes["warnings_as_errors"] = True
    return settings._replace(**changes) if changes else settings
