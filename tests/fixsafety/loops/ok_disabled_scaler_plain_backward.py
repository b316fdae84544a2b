# fixsafety: kind=correct
"""Correct: a scaler built with `enabled=False` (AMP off in this config) used with a plain
`loss.backward()`; a disabled scaler's step is a plain optimizer step."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    off = torch.amp.GradScaler(device_type, enabled=False)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        off.step(optimizer)
        off.update()
        losses.append(loss.item())
    return losses
