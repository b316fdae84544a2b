# fixsafety: kind=misuse codes=AMP001
"""`if use_amp: scaler.step(optimizer)` / `else: optimizer.step()`: the AMP arm never updates
(AMP001). The update belongs in the AMP arm."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = scaler.is_enabled()
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        if use_amp:
            scaler.step(optimizer)
        else:
            optimizer.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = scaler.is_enabled()
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        if use_amp:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        losses.append(loss.item())
    return losses
