# fixsafety: kind=misuse codes=AMP007
"""A `while` loop whose last line is `scaler.update(); step += 1` after an update that already
ran (AMP007). Deleting the extra update must not delete the counter (the loop would never end)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    step = 0
    losses = []
    while step < len(batches):
        x, y = batches[step]
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
        scaler.update(); step += 1
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    step = 0
    losses = []
    while step < len(batches):
        x, y = batches[step]
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
        step += 1
    return losses
