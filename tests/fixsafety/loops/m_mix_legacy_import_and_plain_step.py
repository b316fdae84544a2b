# fixsafety: kind=misuse codes=AMP101,AMP004
"""`from torch.cpu.amp import GradScaler, autocast` (AMP101) and a plain `optimizer.step()` after
the scaled backward followed by the update (AMP004): two fixes in one file, one touching the
import line."""

import torch
from torch.cpu.amp import GradScaler, autocast


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp_scaler = GradScaler(init_scale=2048.0)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with autocast(dtype=dtype):
            loss = loss_fn(model(x), y)
        amp_scaler.scale(loss).backward()
        optimizer.step()
        amp_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp_scaler = torch.amp.GradScaler("cpu", init_scale=2048.0)
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
