"""The click commands of ``amplint`` (the entry point is amplint.cli.main, which parses plain
`check`/`fix` command lines itself and hands everything else, help included, to click)."""

from __future__ import annotations

import os
import sys

import click

from amplint import __version__
from amplint.cli import OUTPUT_FORMATS, run
from amplint.report import quiet_stdout

CHECK_EXIT = """\b
Exit status:
  0  no findings (or --exit-zero); --show-files and --add-noqa exit 0
  1  findings remain, --diff would change a file, or a fix was applied
     with --exit-non-zero-on-fix
  2  a usage or configuration error, or an internal error (AMP900)"""

FIX_EXIT = """\b
Exit status:
  0  nothing remains after fixing (or --exit-zero)
  1  findings remain, --diff would change a file, or a fix was applied
     with --exit-non-zero-on-fix
  2  a usage or configuration error, or an internal error (AMP900)"""


class LazyGroup(click.Group):
    """Subcommands that need torch (amplint.runtime) or pygls (amplint.server) load only when called."""

    lazy = {
        "verify": ("amplint.runtime.commands", "verify_command"),
        "trace": ("amplint.runtime.commands", "trace_command"),
        "server": ("amplint.server.command", "server_command"),  # needs amplint[server] (pygls)
    }
    # the one-liners `amplint --help` shows, so listing the commands loads none of them
    lazy_short_help = {
        "verify": "Compare your train_step with the reference AMP loop (needs torch).",
        "trace": "Run a training script under the AMP sanitizer (needs torch).",
        "server": "Run amplint as a Language Server (LSP over stdio) for editors.",
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

    def format_commands(self, ctx, formatter):
        """Like click's, but whole one-liners (a help line may wrap; it is never cut)."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_short_help:
                rows.append((name, self.lazy_short_help[name]))
                continue
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            rows.append((name, cmd.get_short_help_str(limit=200)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Run `amplint COMMAND --help` for a command's options and exit status.",
)
@click.version_option(__version__, "-V", "--version", prog_name="amplint", message="%(prog)s %(version)s")
def cli():
    """amplint: find and fix PyTorch automatic mixed precision (AMP) misuse.

    \b
    Exit status (check, fix):
      0  no findings
      1  findings remain
      2  a usage or configuration error, or an internal error
    """


def _common_options(f, fix_flag: bool = True):
    opts = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option("--unsafe-fixes", is_flag=True, help="Also apply unsafe fixes (with --fix, `amplint fix`, --diff), and mark them [*]."),
        click.option("--diff", is_flag=True, help="Print the fixes as a unified diff and write nothing; exit 1 if there are any."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option("--warnings-as-errors", is_flag=True, help="Report every warning-level finding as an error, in every format."),
        click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was applied, even if nothing remains."),
        click.option("--statistics", is_flag=True, help="Print a count per rule instead of each finding (full, concise or json)."),
        click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default=None, envvar="AMPLINT_OUTPUT_FORMAT", help="How findings are printed (default: full)."),
        click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None, help="Write the report to this file instead of stdout."),
        click.option("--select", default=None, help="Rule codes or prefixes to run, comma-separated (AMP0, AMP101, ALL)."),
        click.option("--extend-select", default=None, help="Rule codes or prefixes to run on top of the selection."),
        click.option("--ignore", default=None, help="Rule codes or prefixes not to run, comma-separated."),
        click.option("--preview/--no-preview", default=None, help="Run preview rules too (or not)."),
        click.option("--target-torch-version", default=None, help="Oldest torch the code must run on, e.g. 2.1 (fixes that need a newer one are only shown)."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="AMPLINT_CACHE_DIR", help="Where the cache lives (default: .amplint_cache)."),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="The pyproject.toml to read [tool.amplint] from."),
        click.option("--isolated", is_flag=True, help="Ignore every configuration file."),
        click.option("--force-exclude", is_flag=True, default=None, help="Apply the excludes to paths named on the command line too."),
        click.option("--stdin-filename", default=None, help="The file name of the source read from stdin (PATHS is `-`)."),
        click.option("--add-noqa", is_flag=True, help="Append `# noqa: CODE` to every line with a finding, and exit 0."),
        click.option("--show-files", is_flag=True, help="List the files that would be checked, and exit 0."),
        click.option("-q", "--quiet", is_flag=True, help="Print the findings only, without the summary."),
        click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes, at least 1 (default: one per core)."),
        click.option("--per-file-timeout", type=click.FloatRange(min=0), default=None, help="Seconds one file's analysis may take before it is reported as AMP901 (default: 30; 0: no limit)."),
    ]
    if fix_flag:
        opts.insert(1, click.option("--fix/--no-fix", "fix", default=None, help="Apply the safe fixes (add --unsafe-fixes for all)."))
    for o in reversed(opts):
        f = o(f)
    return f


@cli.command("check", epilog=CHECK_EXIT)
@_common_options
def check_command(**kw):
    """Check PATHS (files or directories; default: .) for AMP misuse."""
    sys.exit(run("check", kw))


@cli.command("fix", epilog=FIX_EXIT)
@lambda f: _common_options(f, fix_flag=False)
def fix_command(**kw):
    """Apply the safe fixes to PATHS in place, then report what remains.

    The same as `amplint check --fix`.
    """
    sys.exit(run("fix", {**kw, "fix": True}))


def _echo(text: str) -> None:
    try:
        click.echo(text)
    except BrokenPipeError:  # `amplint rules | head`
        quiet_stdout()


@cli.command("rule", epilog="\b\nExit status:\n  0  printed\n  2  no such rule, or neither CODE nor --all given")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print the documentation of every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="text (markdown) or json.")
def rule_command(code, show_all, output_format):
    """Print the documentation of rule CODE (a code or a rule name)."""
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
        _echo(json.dumps(data if show_all else data[0], indent=2))
    else:
        _echo("\n\n".join(f"{rule_markdown(r)}\nDocumentation: {r.url}\n" for r in rules))


@cli.command("rules", epilog="\b\nExit status:\n  0  always")
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text", help="text, json, or markdown (README's table).")
def rules_command(output_format):
    """List every rule: code, name, severity (error, warning), fix, state (enabled, opt-in, preview)."""
    from amplint.rules import ALL_RULES
    from amplint.docs import rule_json, rules_table

    if output_format == "json":
        import json

        _echo(json.dumps([rule_json(r) for r in ALL_RULES.values()], indent=2))
    elif output_format == "markdown":
        _echo(rules_table(markdown=True))
    else:
        _echo(rules_table(markdown=False))


@cli.command("explain", epilog="\b\nExit status:\n  0  printed\n  2  the file cannot be read or parsed, FUNCTION is not in it, or a configuration error")
@click.argument("target")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="The pyproject.toml to read [tool.amplint] from.")
def explain_command(target, config_path):
    """Show the findings on TARGET (PATH or PATH:FUNCTION) and the facts behind them.

    Prints the findings `amplint check` reports there, each with the events behind it (and, for the rules on the core, the path its analysis followed: AMP001, AMP004, AMP005, AMP006, AMP007, AMP009), then the scalers in scope and where they were built, the AMP events in order with their
    loops, guards and autocast regions, and each call into the project with the summary of the
    function it resolves to.
    """
    from amplint.explain import UnknownFunction, explain
    from amplint.settings import ConfigError, find_config, load_settings
    from amplint.source import SourceError

    path = target if os.path.exists(target) else target.rpartition(":")[0] or target
    try:
        settings = load_settings(config_path or find_config(os.path.abspath(path)))
        click.echo(explain(target, settings), nl=False)
    except UnknownFunction as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (ConfigError, SourceError, SyntaxError, OSError) as exc:
        click.echo(f"error: {path}: {exc}", err=True)
        sys.exit(2)


@cli.command("clean", epilog="\b\nExit status:\n  0  removed, or there was nothing to remove")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="AMPLINT_CACHE_DIR", help="The cache to remove (default: .amplint_cache).")
def clean_command(cache_dir):
    """Remove the cache directory."""
    import shutil

    d = cache_dir or os.path.join(os.getcwd(), ".amplint_cache")
    if os.path.isdir(d):
        shutil.rmtree(d, ignore_errors=True)
        click.echo(f"Removed {d}")
