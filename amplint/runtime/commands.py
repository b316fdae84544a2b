"""Click commands ``verify`` and ``trace`` (registered lazily by the main ``amplint`` CLI).

Neither imports torch until it runs; without torch they print how to install it and exit 2.
"""

from __future__ import annotations

import sys

import click

__all__ = ["verify_command", "trace_command"]

_NEEDS_TORCH = "amplint {cmd} needs torch: pip install 'amplint[runtime]'"


def _require_torch(cmd: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        click.echo(_NEEDS_TORCH.format(cmd=cmd), err=True)
        sys.exit(2)


@click.command("verify")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Device for the harness (auto: cuda when available, else cpu).")
@click.option("--dtype", type=click.Choice(["float16", "bfloat16"]), default="float16", show_default=True,
              help="Autocast dtype.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Save loss curves vs fp32 and the loss-scale trajectory to this image (needs matplotlib).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def verify_command(files: tuple[str, ...], device: str, dtype: str, plot: str | None, as_json: bool) -> None:
    """Run the AMP reference harness on the reference loop and on the train_step/train_loop
    functions in FILES: finite losses, loss vs fp32, overflow skip/backoff, scale growth,
    sameness with the reference loop and a sanitizer pass. Exit 1 when any check fails."""
    _require_torch("verify")
    from amplint.runtime.verify import DeviceUnavailable, PlotUnavailable, format_table, verify

    try:
        rows, code = verify(list(files), device=device, dtype=dtype, plot=plot)
    except (DeviceUnavailable, PlotUnavailable) as exc:
        click.echo(f"amplint verify: {exc}", err=True)
        sys.exit(2)
    if as_json:
        import json

        click.echo(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        click.echo(format_table(rows))
        if plot:
            click.echo(f"plot written to {plot}")
    sys.exit(code)


@click.command("trace", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--json", "as_json", is_flag=True, help="Print the violations as JSON.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def trace_command(command: tuple[str, ...], as_json: bool) -> None:
    """Run a training script under the AMP sanitizer: amplint trace -- python train.py ARGS
    (or amplint trace -- train.py ARGS). Prints path:line: AMPxxx message for each misuse;
    exit 1 when any, else the script's exit status."""
    _require_torch("trace")
    from amplint.runtime.trace import main

    sys.exit(main((["--json"] if as_json else []) + ["--", *command]))
