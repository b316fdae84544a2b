"""The `amplint server` command (loaded lazily by amplint.cli; needs `amplint[server]`)."""

from __future__ import annotations

import click

try:
    import lsprotocol  # noqa: F401
    import pygls  # noqa: F401
except ImportError as exc:  # amplint.cli turns this into "`amplint server` is unavailable: ..."
    from amplint.meta import install_hint

    raise ImportError(f"{exc}; install it with: {install_hint('server')}") from None


def _split(v: str | None) -> tuple[str, ...] | None:
    if v is None:
        return None
    return tuple(s.strip() for s in v.split(",") if s.strip())


@click.command("server")
@click.option("--stdio", is_flag=True, help="Speak LSP over stdin/stdout (the default and only transport; accepted for clients that pass it).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="pyproject.toml to read [tool.amplint] from (default: the nearest one to each file).")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--select", default=None, help="Comma-separated rule codes or prefixes to enable.")
@click.option("--extend-select", default=None, help="Rule codes or prefixes to enable on top of the selection.")
@click.option("--ignore", default=None, help="Comma-separated rule codes or prefixes to disable.")
@click.option("--preview/--no-preview", default=None, help="Enable preview rules.")
@click.option("--target-torch-version", default=None, help="Oldest torch the code must run on.")
@click.option("--per-file-timeout", type=click.FloatRange(min=0), default=None, help="Seconds one document's analysis may take before it is reported as AMP901 (default: 30; 0: no limit).")
@click.option("--debounce", type=click.FloatRange(min=0), default=0.3, show_default=True, help="Seconds to wait after the last change before re-checking.")
def server_command(stdio, config_path, isolated, select, extend_select, ignore, preview, target_torch_version, per_file_timeout, debounce):
    """Run amplint as a Language Server (LSP over stdio) for editors."""
    import os

    from amplint.server.server import serve
    from amplint.server.workspace import ServerOptions

    options = ServerOptions(
        config_path=os.path.abspath(config_path) if config_path else None, isolated=isolated,
        select=_split(select), extend_select=_split(extend_select), ignore=_split(ignore), preview=preview,
        target_torch_version=target_torch_version, per_file_timeout=per_file_timeout,
    )
    serve(options, debounce)
