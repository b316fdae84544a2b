# fixsafety: kind=correct
"""Correct: the canonical tail written on one line,
`scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip_grad_norm_(...); scaler.step(optimizer); scaler.update()`."""

import torch
from torch.nn.utils import clip_grad_norm_


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype): loss = loss_fn(model(x), y)
        scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip_grad_norm_(model.parameters(), 1.0); scaler.step(optimizer); scaler.update()
        losses.append(loss.item())
    return losses
