"""The ``amplint`` command line (ruff's conventions: exit 0 clean, 1 findings, 2 errors)."""

from __future__ import annotations

import os
import sys
import traceback

import click

from amplint import __version__

OUTPUT_FORMATS = ["full", "concise", "json", "json-lines", "github", "sarif", "gitlab", "junit"]


class LazyGroup(click.Group):
    """Subcommands that need torch (amplint.runtime) or pygls (amplint.server) load only when called."""

    lazy = {
        "verify": ("amplint.runtime.commands", "verify_command"),
        "trace": ("amplint.runtime.commands", "trace_command"),
        "server": ("amplint.server.command", "server_command"),  # needs amplint[server] (pygls)
    }

    def list_commands(self, ctx):
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx, name):
        if name in self.lazy:
            mod, attr = self.lazy[name]
            try:
                from importlib import import_module

                return getattr(import_module(mod), attr)
            except (ImportError, AttributeError) as exc:
                reason = str(exc)

                @click.command(name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
                def unavailable():
                    click.echo(f"error: `amplint {name}` is unavailable: {reason}", err=True)
                    sys.exit(2)

                return unavailable
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="amplint", message="%(prog)s %(version)s")
def cli():
    """amplint: find and fix PyTorch automatic mixed precision (AMP) misuse."""


def _common_options(f):
    opts = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option("--fix/--no-fix", "fix", default=None, help="Apply fixes (safe ones; add --unsafe-fixes for the rest)."),
        click.option("--unsafe-fixes", is_flag=True, help="Also apply, or show as fixable, unsafe fixes."),
        click.option("--diff", is_flag=True, help="Print a diff of the fixes instead of writing them; exit 1 if any."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when something was fixed, even if nothing remains."),
        click.option("--statistics", is_flag=True, help="Print a count per rule instead of each finding."),
        click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default=None, envvar="AMPLINT_OUTPUT_FORMAT", help="Output format (default: full)."),
        click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None, help="Write the report to this file."),
        click.option("--select", default=None, help="Comma-separated rule codes or prefixes to enable (e.g. AMP0,AMP101)."),
        click.option("--extend-select", default=None, help="Rule codes or prefixes to enable on top of the selection."),
        click.option("--ignore", default=None, help="Comma-separated rule codes or prefixes to disable."),
        click.option("--preview/--no-preview", default=None, help="Enable preview rules."),
        click.option("--target-torch-version", default=None, help="Oldest torch the code must run on (fixes needing a newer one become display-only)."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="AMPLINT_CACHE_DIR", help="Cache directory (default: .amplint_cache)."),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="pyproject.toml to read [tool.amplint] from."),
        click.option("--isolated", is_flag=True, help="Ignore all configuration files."),
        click.option("--force-exclude", is_flag=True, default=None, help="Apply excludes to paths given explicitly too."),
        click.option("--stdin-filename", default=None, help="The name of the file when reading from stdin (`-`)."),
        click.option("--add-noqa", is_flag=True, help="Append `# noqa: CODE` to every line with a finding."),
        click.option("--show-files", is_flag=True, help="List the files that would be checked, and exit."),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
        click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: one per core)."),
        click.option("--per-file-timeout", type=click.FloatRange(min=0), default=None, help="Seconds one file's analysis may take before it is reported as AMP901 (default: 30; 0: no limit)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@cli.command("check")
@_common_options
def check_command(**kw):
    """Check PATHS (default: the current directory) for AMP misuse."""
    sys.exit(_run(**kw))


@cli.command("fix")
@_common_options
def fix_command(**kw):
    """Fix PATHS in place (same as `amplint check --fix`)."""
    if kw.get("fix") is None:
        kw["fix"] = True
    sys.exit(_run(**kw))


def _split(v: str | None) -> tuple[str, ...] | None:
    if v is None:
        return None
    return tuple(s.strip() for s in v.split(",") if s.strip())


def _safe_streams() -> None:
    """A file name that is not valid in the output encoding (undecodable bytes on POSIX, or
    non-ASCII under an ASCII/cp1252 console) must not crash the report: escape it instead."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def _run(**kw) -> int:
    _safe_streams()
    try:
        from amplint.pipeline import Options, run_check

        return run_check(Options.from_cli(kw))
    except click.exceptions.Exit:
        raise
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 130
    except Exception as exc:  # pragma: no cover - last resort
        click.echo(f"error: amplint crashed: {type(exc).__name__}: {exc}", err=True)
        click.echo("".join(traceback.format_exc()), err=True)
        click.echo("This is a bug in amplint; please report it.", err=True)
        return 2


@cli.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print the docs of every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule_command(code, show_all, output_format):
    """Print the documentation of rule CODE."""
    from amplint.rules import ALL_RULES
    from amplint.docs import rule_json, rule_markdown

    if show_all:
        rules = list(ALL_RULES.values())
    elif code:
        rule = ALL_RULES.get(code.upper()) or next((r for r in ALL_RULES.values() if r.name == code), None)
        if rule is None:
            click.echo(f"error: unknown rule `{code}` (see `amplint rules`)", err=True)
            sys.exit(2)
        rules = [rule]
    else:
        click.echo("error: give a rule code (e.g. `amplint rule AMP001`) or --all", err=True)
        sys.exit(2)
    if output_format == "json":
        import json

        data = [rule_json(r) for r in rules]
        click.echo(json.dumps(data if show_all else data[0], indent=2))
    else:
        click.echo("\n\n".join(rule_markdown(r) for r in rules))


@cli.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text")
def rules_command(output_format):
    """List every rule with its name, fixability and default state."""
    from amplint.rules import ALL_RULES
    from amplint.docs import rule_json, rules_table

    if output_format == "json":
        import json

        click.echo(json.dumps([rule_json(r) for r in ALL_RULES.values()], indent=2))
    elif output_format == "markdown":
        click.echo(rules_table(markdown=True))
    else:
        click.echo(rules_table(markdown=False))


@cli.command("explain")
@click.argument("target")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="pyproject.toml to read [tool.amplint] from.")
def explain_command(target, config_path):
    """Show the facts behind the verdict on TARGET (PATH or PATH:FUNCTION).

    Prints the scalers in scope and where they were built, the AMP events in order with their
    loops, guards and autocast regions, and each call into the project with the summary of the
    function it resolves to. Exit codes: 0 printed, 2 the file cannot be read or parsed.
    """
    from amplint.explain import explain
    from amplint.settings import ConfigError, find_config, load_settings
    from amplint.source import SourceError

    path = target if os.path.exists(target) else target.rpartition(":")[0] or target
    try:
        settings = load_settings(config_path or find_config(os.path.abspath(path)))
        click.echo(explain(target, settings), nl=False)
    except (ConfigError, SourceError, SyntaxError, OSError) as exc:
        click.echo(f"error: {path}: {exc}", err=True)
        sys.exit(2)


@cli.command("clean")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="AMPLINT_CACHE_DIR")
def clean_command(cache_dir):
    """Remove the cache directory."""
    import shutil

    d = cache_dir or os.path.join(os.getcwd(), ".amplint_cache")
    if os.path.isdir(d):
        shutil.rmtree(d, ignore_errors=True)
        click.echo(f"Removed {d}")


def main(argv=None) -> None:
    cli.main(args=argv, prog_name="amplint")


if __name__ == "__main__":  # pragma: no cover
    main()
