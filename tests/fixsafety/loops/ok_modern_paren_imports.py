# fixsafety: kind=correct
"""Correct: the modern API imported in a parenthesised multi-line import with comments,
`from torch.amp import (GradScaler, autocast)`; the loop builds its own CPU scaler."""

import torch
from torch.amp import (  # device-generic AMP API
    GradScaler,  # needs a device
    autocast,
)


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp_scaler = GradScaler(device_type, init_scale=2.0 ** 14)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        amp_scaler.scale(loss).backward()
        amp_scaler.step(optimizer)
        amp_scaler.update()
        losses.append(loss.item())
    return losses
