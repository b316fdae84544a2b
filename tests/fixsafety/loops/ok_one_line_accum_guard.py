# fixsafety: kind=correct
"""Correct: accumulation over 2 micro-batches with the whole step in a one-line suite,
`if (i + 1) % accum == 0: scaler.step(optimizer); scaler.update(); optimizer.zero_grad()`."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 2
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0: scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
        losses.append(loss.item())
    return losses
