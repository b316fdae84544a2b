# fixsafety: kind=misuse codes=AMP102
"""`scaler.check_overflow()` carried over from another loss scaler (AMP102, no fix: raises
AttributeError; the parameter is annotated as a torch GradScaler). The correct way compares the scale before and after update()."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler: torch.amp.GradScaler, *, device_type, dtype):
    skipped = 0
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if scaler.check_overflow():
            skipped += 1
        losses.append(loss.item())
    return losses + [float(skipped)]


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    skipped = 0
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() < before:
            skipped += 1
        losses.append(loss.item())
    return losses + [float(skipped)]
