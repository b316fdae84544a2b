# fixsafety: kind=misuse codes=AMP101 defect=5
"""The CPU flavour of defect 5: `LegacyScaler = torch.cpu.amp.GradScaler` called as
`LegacyScaler(4096.0, growth_interval=3)` (AMP101). A rewrite of the alias to
`torch.amp.GradScaler` turns 4096.0 into the device and the scale starts at 65536 instead of
4096, which changes every skipped step and the scale history."""

import torch

LegacyScaler = torch.cpu.amp.GradScaler


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = LegacyScaler(4096.0, growth_interval=3)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = torch.amp.GradScaler("cpu", 4096.0, growth_interval=3)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses
