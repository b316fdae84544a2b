# fixsafety: kind=misuse codes=AMP005
"""Backward, step and update on one line, `loss.backward(); scaler.step(optimizer);
scaler.update()`, with the backward unscaled (AMP005)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        loss.backward(); scaler.step(optimizer); scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()
        losses.append(loss.item())
    return losses
