# fixsafety: kind=correct
"""Correct: a `while True:` loop over an iterator, ended by StopIteration."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    it = iter(batches)
    losses = []
    while True:
        try:
            x, y = next(it)
        except StopIteration:
            break
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
