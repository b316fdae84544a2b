# fixsafety: kind=misuse codes=AMP006,AMP001
"""One long line `scaler.scale(loss).backward(); clip_grad_norm_(params, 2.0); scaler.step(opt)`
with the clip before unscale_ (AMP006) and no update (AMP001)."""

import torch
from torch.nn.utils import clip_grad_norm_


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    params = list(model.parameters())
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward(); clip_grad_norm_(params, 2.0); scaler.step(optimizer)
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    params = list(model.parameters())
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip_grad_norm_(params, 2.0); scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
