# fixsafety: kind=misuse codes=AMP103
"""`torch.amp.autocast(enabled=True, dtype=dtype)` without a device in a file whose scaler is
`torch.amp.GradScaler("cpu")` (AMP103)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.amp.autocast(enabled=True, dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.amp.autocast("cpu", enabled=True, dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses
