# fixsafety: kind=misuse codes=AMP004
"""A helper that does backward and step on one line,
`scaler.scale(loss).backward(); optimizer.step(); scaler.update()` (AMP004)."""

import torch


def backward_and_step(loss, optimizer, scaler):
    scaler.scale(loss).backward(); optimizer.step(); scaler.update()


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        backward_and_step(loss, optimizer, scaler)
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def _expected_backward_and_step(loss, optimizer, scaler):
    scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        _expected_backward_and_step(loss, optimizer, scaler)
        losses.append(loss.item())
    return losses
