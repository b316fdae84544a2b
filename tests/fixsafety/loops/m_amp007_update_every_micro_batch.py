# fixsafety: kind=misuse codes=AMP007
"""Accumulation with the step under `if (i + 1) % accum == 0:` but the update on every
micro-batch (AMP007: a micro-batch without a step raises "No inf checks were recorded prior to
update"). The update belongs under the guard."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 2
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
        scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 2
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
            scaler.update()
        losses.append(loss.item())
    return losses
