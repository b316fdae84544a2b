# fixsafety: kind=misuse codes=AMP002
"""Backward inside autocast followed by logging statements in the same block (AMP002): moving
the logging out of autocast is not obviously safe (the fix is unsafe at best)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    running = 0.0
    losses = []
    for step, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            running = 0.9 * running + 0.1 * loss.item()
        scaler.step(optimizer)
        scaler.update()
        losses.append(running)
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    running = 0.0
    losses = []
    for step, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        running = 0.9 * running + 0.1 * loss.item()
        scaler.step(optimizer)
        scaler.update()
        losses.append(running)
    return losses
