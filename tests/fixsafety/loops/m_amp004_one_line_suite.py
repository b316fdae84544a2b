# fixsafety: kind=misuse codes=AMP004
"""Accumulation with a one-line suite, `if (i + 1) % 2 == 0: optimizer.step(); scaler.update()`,
after scaled backwards (AMP004)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    optimizer.zero_grad()
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / 2
        scaler.scale(loss).backward()
        if (i + 1) % 2 == 0: optimizer.step(); scaler.update(); optimizer.zero_grad()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    optimizer.zero_grad()
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / 2
        scaler.scale(loss).backward()
        if (i + 1) % 2 == 0: scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
        losses.append(loss.item())
    return losses
