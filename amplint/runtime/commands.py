"""Click commands ``verify`` and ``trace`` (registered lazily by the main ``amplint`` CLI).

Neither imports torch until it runs; without torch they print how to install it and exit 2.
"""

from __future__ import annotations

import sys

import click

__all__ = ["verify_command", "trace_command"]

def _needs_torch(cmd: str) -> str:
    from amplint.meta import torch_hint

    return f"amplint {cmd} needs torch: {torch_hint()}"


def _require_torch(cmd: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        click.echo(_needs_torch(cmd), err=True)
        sys.exit(2)


def _write_output(text: str, output_file: str | None) -> None:
    """amplint's own output: to stdout, or to ``-o FILE`` (an unwritable file is a usage error)."""
    if output_file is None:
        click.echo(text)
        return
    try:
        with open(output_file, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        click.echo(f"amplint: cannot write {output_file}: {exc.strerror or exc}", err=True)
        sys.exit(2)


def _parse_args(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition("=")
        name = name.strip()
        if not sep or not name:
            raise click.BadParameter(f"{v!r}: expected NAME=VALUE", param_hint="--arg")
        out[name] = value
    return out


VERIFY_HELP = """Run the training functions in FILES on a tiny seeded model and check that AMP behaves.

\b
What runs: only the files' imports, def/class statements and constant
assignments (the script's directory is on sys.path); never a top-level
call, loop, argparse or `if __name__ == "__main__":` block. The static model
picks the functions and methods that train (scaler.scale/step/update,
backward, optimizer.step); a helper called by another training function is
verified through its caller. Parameters are mapped by role (model,
optimizer(s), scaler, loader or batch, loss function, device, dtype,
accumulation steps, epochs = 1, ...) and the mapping is printed; a method
gets an instance whose attributes (self.model, self.scaler, ...) are the
harness objects. Each function then runs five checks (finite losses, loss
vs an fp32 run, learning, overflow skip/backoff, scale growth), is compared
bit for bit (CPU) with the reference loop configured like it (accumulation,
clipping, optimizers, dtype), and runs 3 steps under the sanitizer.

\b
Exit status:
  0  every check passed and the sanitizer saw no misuse
  1  a check failed, a misuse was seen, a file could not be loaded,
     or a function could not be mapped (nothing verified)
  2  usage error (bad option, --function/--arg not found, --device cuda
     without CUDA, a --plot file that cannot be written, no torch)
"""


@click.command("verify", help=VERIFY_HELP)
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--function", "function", metavar="NAME", default=None,
              help="Verify only this function or method (`train_loop`, `Trainer.fit`), even a helper.")
@click.option("--arg", "args", metavar="NAME=VALUE", multiple=True,
              help="Set a parameter, self attribute or module-level name the function needs (repeatable). "
                   "VALUE is a Python literal, else an expression in the script's namespace, else a string.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Device for the harness (auto: cuda when available, else cpu).")
@click.option("--dtype", type=click.Choice(["float16", "bfloat16"]), default="float16", show_default=True,
              help="Autocast dtype passed to the functions (a loop that hard-codes one keeps its own).")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Save loss curves vs fp32 and the loss-scale trajectory to this image "
                   "(.png, .pdf, .svg, ...; needs matplotlib: pip install matplotlib).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), default=None,
              help="Write amplint's output (table or JSON) to this file instead of stdout.")
def verify_command(files: tuple[str, ...], function: str | None, args: tuple[str, ...], device: str,
                   dtype: str, plot: str | None, as_json: bool, output_file: str | None) -> None:
    _require_torch("verify")
    from amplint.runtime.verify import (DeviceUnavailable, PlotUnavailable, UsageError, format_table,
                                        verify)

    try:
        rows, code = verify(list(files), device=device, dtype=dtype, plot=plot, function=function,
                            args=_parse_args(args))
    except (DeviceUnavailable, PlotUnavailable, UsageError) as exc:
        click.echo(f"amplint verify: {exc}", err=True)
        sys.exit(2)
    if as_json:
        import json

        text = json.dumps([r.as_dict() for r in rows], indent=2)
    else:
        text = format_table(rows)
        if plot:
            text += f"\nplot written to {plot}"
    _write_output(text, output_file)
    sys.exit(code)


TRACE_HELP = """Run COMMAND under the AMP sanitizer and report misuse from the running program.

\b
  amplint trace -- python train.py --epochs 1
  amplint trace -- train.py                       (this interpreter)
  amplint trace -- python -u -X dev train.py      (interpreter options pass through)
  amplint trace -- /usr/bin/env python train.py
  amplint trace -- torchrun --nproc-per-node 2 train.py
  amplint trace -- python -m torch.distributed.run --nproc-per-node 2 train.py
  amplint trace -- accelerate launch train.py

\b
Every Python process the command starts (launcher workers, multiprocessing
children) is traced from the moment it imports torch, through a start-up
hook on PYTHONPATH. Findings print on stdout as `path:line: AMPxxx message`,
merged across processes with a count and the ranks. A summary always ends
the run on stderr: processes, each GradScaler (device, enabled or why not),
iterations, scaler steps, autocast regions, findings; it says so when nothing
was checked (e.g. "the GradScaler is disabled: CUDA is not available").

\b
Exit status:
  1  an AMP misuse was found, or nothing was checked and
     --fail-if-unchecked was given
  2  usage error (no command, no such file, command not found,
     python -I/-E/-S, no torch)
  otherwise the program's own exit status (0 when it succeeded)
"""


@click.command("trace", help=TRACE_HELP,
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (violations, processes, checked) on stdout; the program's "
                   "own stdout then goes to stderr.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), default=None,
              help="Write the findings (text or JSON) to this file instead of stdout.")
@click.option("--fail-if-unchecked", is_flag=True,
              help="Exit 1 when nothing was checked (every GradScaler disabled, no AMP at all): for CI.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def trace_command(command: tuple[str, ...], as_json: bool, output_file: str | None,
                  fail_if_unchecked: bool) -> None:
    from amplint.runtime.trace import CommandError, main, resolve_command

    try:
        resolved = resolve_command(command)
    except CommandError:
        resolved = []  # main() reports it
    if resolved and resolved[0] == sys.executable:
        _require_torch("trace")
    opts = (["--json"] if as_json else []) + (["-o", output_file] if output_file else []) + (
        ["--fail-if-unchecked"] if fail_if_unchecked else [])
    sys.exit(main([*opts, "--", *command]))
