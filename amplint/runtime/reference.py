"""The canonical AMP training step and loop (the reference amplint checks against).

The canonical order of one optimisation step, which this module implements exactly::

    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()      # outside autocast
    scaler.step(optimizer)             # unscales, skips the step on inf/NaN
    scaler.update()                    # once per iteration, after every optimizer stepped
    losses.append(loss.item())

With clipping, ``scaler.unscale_(optimizer)`` and then
``torch.nn.utils.clip_grad_norm_(params, clip)`` go between the backward and
``scaler.step``. With gradient accumulation over ``N`` micro-batches, ``zero_grad`` runs at the
first micro-batch, each micro-batch does ``scaler.scale(loss / N).backward()``, and
unscale/clip/step/update run once after the last micro-batch. With several optimizers (pass a
list), each is zeroed, unscaled and stepped in order and ``scaler.update()`` runs once, after
the last ``scaler.step``. ``autocast=False`` runs the forward pass in fp32 (with a disabled
scaler this is the fp32 baseline ``amplint verify`` compares against).

The scaler is always created with its device, ``torch.amp.GradScaler(device_type)``:
the default ``'cuda'`` silently disables scaling on a CPU-only machine.

Both functions follow the two loop contracts that ``amplint verify`` accepts:

* per-iteration: ``train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype)``
  where ``batch`` is ``(x, y)``; returns the float loss;
* whole loop: ``train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype)``
  where ``batches`` is a list of ``(x, y)``; returns the list of float losses.

A loop written to the canonical order above matches these functions bit for bit on CPU.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import torch

__all__ = ["train_step", "train_loop", "make_scaler"]


def make_scaler(device_type: str, **kwargs: Any) -> "torch.amp.GradScaler":
    """``torch.amp.GradScaler`` with the device passed explicitly (never the 'cuda' default)."""
    return torch.amp.GradScaler(device_type, **kwargs)


def _optimizers(optimizer: Any) -> list[torch.optim.Optimizer]:
    return list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]


def train_step(
    model: torch.nn.Module,
    batch: Sequence[torch.Tensor],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
    scaler: "torch.amp.GradScaler",
    *,
    device_type: str,
    dtype: torch.dtype,
    clip: float | None = None,
    accum_steps: int = 1,
    micro_index: int = 0,
    autocast: bool = True,
    last: bool | None = None,
) -> float:
    """One canonical AMP step (or one micro-batch of an accumulated step); returns ``loss.item()``.

    With ``accum_steps > 1``, ``micro_index`` (0-based, ``< accum_steps``) says which micro-batch
    this is: gradients are zeroed at micro-batch 0 and the optimizer steps after the last one
    (or earlier when ``last=True``: the final, partial accumulation of an epoch).
    """
    if accum_steps < 1 or not 0 <= micro_index < accum_steps:
        raise ValueError(f"need accum_steps >= 1 and 0 <= micro_index < accum_steps, got {accum_steps}, {micro_index}")
    x, y = batch
    opts = _optimizers(optimizer)
    if micro_index == 0:
        for opt in opts:
            opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype, enabled=autocast):
        loss = loss_fn(model(x), y)
    if accum_steps == 1:
        scaler.scale(loss).backward()
    else:
        scaler.scale(loss / accum_steps).backward()
    if micro_index == accum_steps - 1 or last:
        if clip is not None:
            for opt in opts:
                scaler.unscale_(opt)
            params = [p for opt in opts for group in opt.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, clip)
        for opt in opts:
            scaler.step(opt)
        scaler.update()
    return loss.item()


def train_loop(
    model: torch.nn.Module,
    batches: Iterable[Sequence[torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
    scaler: "torch.amp.GradScaler",
    *,
    device_type: str,
    dtype: torch.dtype,
    clip: float | None = None,
    accum_steps: int = 1,
    autocast: bool = True,
    flush: bool = False,
) -> list[float]:
    """Run :func:`train_step` over ``batches``; returns the per-batch losses.

    ``flush=True`` also steps after the last batch when it ends a partial accumulation.
    """
    losses = []
    n = len(batches) if flush else -1  # type: ignore[arg-type]  # flush needs a sized iterable
    for i, batch in enumerate(batches):
        losses.append(
            train_step(
                model, batch, loss_fn, optimizer, scaler,
                device_type=device_type, dtype=dtype, clip=clip,
                accum_steps=accum_steps, micro_index=i % accum_steps, autocast=autocast,
                last=flush and i == n - 1,
            )
        )
    return losses
