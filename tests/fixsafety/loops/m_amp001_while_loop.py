# fixsafety: kind=misuse codes=AMP001
"""A `while` loop with the counter bumped on the step's line, `scaler.step(optimizer); i += 1`,
and no update (AMP001)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    i = 0
    losses = []
    while i < len(batches):
        features, target = batches[i]
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(features), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer); i += 1
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    i = 0
    losses = []
    while i < len(batches):
        features, target = batches[i]
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(features), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        i += 1
        losses.append(loss.item())
    return losses
