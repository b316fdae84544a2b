# fixsafety: kind=correct
"""Correct: an optional scaler with one-line guards,
`if scaler is not None: scaler.step(optimizer); scaler.update()` and `else: optimizer.step()`."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    scaler = torch.amp.GradScaler(device_type) if dtype is torch.float16 else None
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        if scaler is not None: scaler.scale(loss).backward()
        else: loss.backward()
        if scaler is not None: scaler.step(optimizer); scaler.update()
        else: optimizer.step()
        losses.append(loss.item())
    return losses
