# fixsafety: kind=correct
"""Correct: `scaler.step(optimizer)` in a `try:` and `scaler.update()` in its `finally:`."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        try:
            scaler.step(optimizer)
        finally:
            scaler.update()
        losses.append(loss.item())
    return losses
