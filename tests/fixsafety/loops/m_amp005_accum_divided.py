# fixsafety: kind=misuse codes=AMP005
"""Accumulation over 4 micro-batches with `(loss / accum_steps).backward()` unscaled and the
step under the accumulation guard (AMP005)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum_steps = 4
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        (loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum_steps = 4
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses
