# fixsafety: kind=correct
"""Correct: `scaled = scaler.scale(loss)` then `scaled.backward()`; the backward is scaled."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
