# fixsafety: kind=misuse codes=AMP101
"""`import torch.cpu.amp as cpu_amp`, then `cpu_amp.autocast(...)` and
`cpu_amp.GradScaler(init_scale=512.0)` (AMP101)."""

import torch
import torch.cpu.amp as cpu_amp


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp_scaler = cpu_amp.GradScaler(init_scale=512.0)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with cpu_amp.autocast(dtype=dtype):
            loss = loss_fn(model(x), y)
        amp_scaler.scale(loss).backward()
        amp_scaler.step(optimizer)
        amp_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp_scaler = torch.amp.GradScaler("cpu", init_scale=512.0)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.amp.autocast("cpu", dtype=dtype):
            loss = loss_fn(model(x), y)
        amp_scaler.scale(loss).backward()
        amp_scaler.step(optimizer)
        amp_scaler.update()
        losses.append(loss.item())
    return losses
