# fixsafety: kind=misuse codes=AMP004
"""A `use_amp` flag: the backward is `if use_amp: scaler.scale(loss).backward()` /
`else: loss.backward()`, but the step is a plain `optimizer.step()` (AMP004 when AMP is on).
The loop's scaler is built with `enabled=use_amp`."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    amp_scaler = torch.amp.GradScaler(device_type, enabled=use_amp)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        if use_amp:
            amp_scaler.scale(loss).backward()
        else:
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    amp_scaler = torch.amp.GradScaler(device_type, enabled=use_amp)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        if use_amp:
            amp_scaler.scale(loss).backward()
        else:
            loss.backward()
        if use_amp:
            amp_scaler.step(optimizer)
            amp_scaler.update()
        else:
            optimizer.step()
        losses.append(loss.item())
    return losses
