# fixsafety: kind=correct
"""Correct: `unscale_` then `clip_grad_value_` (imported by name), step, update."""

import torch
from torch.nn.utils import clip_grad_value_


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        clip_grad_value_(model.parameters(), 0.25)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
