# fixsafety: kind=correct
"""Correct: zero_grad at the end of the iteration, after the update (also before the first
iteration)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    optimizer.zero_grad(set_to_none=True)
    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses
