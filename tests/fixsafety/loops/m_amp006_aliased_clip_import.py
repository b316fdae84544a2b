# fixsafety: kind=misuse codes=AMP006
"""`from torch.nn.utils import clip_grad_norm_ as clip` used right after the scaled backward
(AMP006)."""

import torch
from torch.nn.utils import clip_grad_norm_ as clip


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    max_norm = 1.0
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        clip(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    max_norm = 1.0
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        clip(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
