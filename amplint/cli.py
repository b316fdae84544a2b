"""The ``amplint`` command line (ruff's conventions: exit 0 clean, 1 findings, 2 errors).

``main`` is the entry point. The commands themselves are click commands (amplint.clickapp);
importing click costs more than checking a file, so ``amplint check``/``fix`` with plain
options is parsed here, by a small parser that yields exactly the parameters click would
(tests/test_cli_startup.py compares the two on many command lines), and anything it does not
know for sure (``--help``, a bad value, an unknown option, bundled short options, ...) goes to
click, so help, errors and every option behave the same either way.
"""

from __future__ import annotations

import os
import sys

OUTPUT_FORMATS = ["full", "concise", "json", "json-lines", "github", "sarif", "gitlab", "junit"]

# --- the fast path: `check`/`fix` without click -------------------------------------------

# every parameter of `check`/`fix` and its default, as click passes it
DEFAULTS = {
    "paths": (),
    "fix": None,
    "unsafe_fixes": False,
    "diff": False,
    "exit_zero": False,
    "warnings_as_errors": False,
    "exit_non_zero_on_fix": False,
    "statistics": False,
    "output_format": None,
    "output_file": None,
    "select": None,
    "extend_select": None,
    "ignore": None,
    "preview": None,
    "target_torch_version": None,
    "no_cache": False,
    "cache_dir": None,
    "config_path": None,
    "isolated": False,
    "force_exclude": None,
    "stdin_filename": None,
    "add_noqa": False,
    "show_files": False,
    "quiet": False,
    "jobs": None,
    "per_file_timeout": None,
}
FLAGS = {  # option -> (parameter, value)
    "--fix": ("fix", True),
    "--no-fix": ("fix", False),
    "--unsafe-fixes": ("unsafe_fixes", True),
    "--diff": ("diff", True),
    "--exit-zero": ("exit_zero", True),
    "--warnings-as-errors": ("warnings_as_errors", True),
    "--exit-non-zero-on-fix": ("exit_non_zero_on_fix", True),
    "--statistics": ("statistics", True),
    "--preview": ("preview", True),
    "--no-preview": ("preview", False),
    "--no-cache": ("no_cache", True),
    "--isolated": ("isolated", True),
    "--force-exclude": ("force_exclude", True),
    "--add-noqa": ("add_noqa", True),
    "--show-files": ("show_files", True),
    "-q": ("quiet", True),
    "--quiet": ("quiet", True),
}
VALUES = {  # option -> parameter (options that take a value)
    "--output-format": "output_format",
    "-o": "output_file",
    "--output-file": "output_file",
    "--select": "select",
    "--extend-select": "extend_select",
    "--ignore": "ignore",
    "--target-torch-version": "target_torch_version",
    "--cache-dir": "cache_dir",
    "--config": "config_path",
    "--stdin-filename": "stdin_filename",
    "-j": "jobs",
    "--jobs": "jobs",
    "--per-file-timeout": "per_file_timeout",
}
NOT_FOR_FIX = {"--fix", "--no-fix"}  # `amplint fix` always fixes


def _plain_number(v: str, decimal: bool) -> bool:
    """Digits (with at most one dot when ``decimal``): what int()/float() and click agree on."""
    if not v.isascii():
        return False
    head, dot, tail = v.partition(".") if decimal else (v, "", "")
    return bool(head + tail) and (head == "" or head.isdigit()) and (tail == "" or tail.isdigit())


def fast_parse(command: str, args: list[str]) -> dict | None:
    """The parameters click would pass to `command` (check or fix) for ``args``, or None
    when click must decide (help, errors, anything unusual)."""
    kw = dict(DEFAULTS)
    paths: list[str] = []
    i, n = 0, len(args)
    only_paths = False
    while i < n:
        a = args[i]
        i += 1
        if only_paths or a == "-" or not a.startswith("-"):
            paths.append(a)
            continue
        if a == "--":
            only_paths = True
            continue
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        if command == "fix" and name in NOT_FOR_FIX:
            return None
        if name in FLAGS and not eq:
            dest, v = FLAGS[name]
            kw[dest] = v
            continue
        if name not in VALUES:
            return None  # --help, -h, unknown or bundled options: click's answer
        if not eq:
            if i >= n:
                return None
            value = args[i]
            i += 1
        if value == "" or (value.startswith("-") and value != "-"):
            return None
        kw[VALUES[name]] = value
    kw["paths"] = tuple(paths)
    return kw if _valid(kw) else None


def _valid(kw: dict) -> bool:
    """Convert and check the values as click's types would; False: let click report it."""
    env_fmt = os.environ.get("AMPLINT_OUTPUT_FORMAT")
    if kw["output_format"] is None and env_fmt:
        kw["output_format"] = env_fmt
    if kw["output_format"] is not None and kw["output_format"] not in OUTPUT_FORMATS:
        return False
    env_cache = os.environ.get("AMPLINT_CACHE_DIR")
    if kw["cache_dir"] is None and env_cache:
        kw["cache_dir"] = env_cache
    if kw["cache_dir"] is not None and os.path.exists(kw["cache_dir"]) and not os.path.isdir(kw["cache_dir"]):
        return False
    for key in ("output_file", "config_path"):
        if kw[key] is not None and os.path.isdir(kw[key]):
            return False
    out = kw["output_file"]
    if out is not None and os.path.exists(out) and not os.access(out, os.W_OK):
        return False
    if kw["jobs"] is not None:
        if not _plain_number(kw["jobs"], False) or int(kw["jobs"]) < 1:
            return False
        kw["jobs"] = int(kw["jobs"])
    if kw["per_file_timeout"] is not None:
        if not _plain_number(kw["per_file_timeout"], True):
            return False
        kw["per_file_timeout"] = float(kw["per_file_timeout"])
    return True


# --- running check/fix ---------------------------------------------------------------------


def _safe_streams() -> None:
    """A file name that is not valid in the output encoding (undecodable bytes on POSIX, or
    non-ASCII under an ASCII/cp1252 console) must not crash the report: escape it instead."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def run(command: str, kw: dict) -> int:
    """Run `check` or `fix` with click's parameters ``kw``; returns the exit status."""
    _safe_streams()
    if command == "fix":
        kw = {**kw, "fix": True}
    try:
        from amplint.pipeline import Options, run_check

        return run_check(Options.from_cli(kw))
    except SystemExit:
        raise
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left: end quietly, as a shell's SIGPIPE would
        from amplint.report import quiet_stdout

        quiet_stdout()
        return 141
    except Exception as exc:  # pragma: no cover - last resort
        import traceback

        print(f"error: amplint crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("".join(traceback.format_exc()), file=sys.stderr)
        print("This is a bug in amplint; please report it.", file=sys.stderr)
        return 2


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args in (["--version"], ["-V"]):  # what click's version option prints
        from amplint import __version__

        print(f"amplint {__version__}")
        sys.exit(0)
    if args and args[0] in ("check", "fix"):
        kw = fast_parse(args[0], args[1:])
        if kw is not None:
            sys.exit(run(args[0], kw))
    from amplint.clickapp import cli

    cli.main(args=args, prog_name="amplint")


def __getattr__(name: str):
    """``amplint.cli.cli`` and the other click objects, for code that imported them here."""
    if name in ("cli", "LazyGroup", "check_command", "fix_command", "rule_command", "rules_command", "explain_command", "clean_command"):
        from amplint import clickapp

        return getattr(clickapp, name)
    raise AttributeError(name)


if __name__ == "__main__":  # pragma: no cover
    main()
