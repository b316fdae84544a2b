# fixsafety: kind=correct
"""Correct: a batch whose loss is not finite (or every fifth batch, as a stand-in for a data
filter) is skipped with `continue` before the backward, so no step and no update run for it."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        if not torch.isfinite(loss) or i % 5 == 4:
            losses.append(None)
            continue
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
