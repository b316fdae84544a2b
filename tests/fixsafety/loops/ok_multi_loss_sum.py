# fixsafety: kind=correct
"""Correct: two losses summed into one scaled backward, `scaler.scale(main + 0.1 * aux)`."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            out = model(x)
            main = loss_fn(out, y)
            aux = out.float().abs().mean()
        scaler.scale(main + 0.1 * aux).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(main.item())
    return losses
