# fixsafety: kind=misuse codes=AMP101 defect=8
"""A parenthesised multi-line `from torch.cpu.amp import (...)` with a trailing comment on the
statement and a comment on each name (AMP101, the legacy CPU API). Issue 11 defect 8: the fix
rewrites the import and loses the comments."""

import torch
from torch.cpu.amp import (  # legacy CPU AMP API, kept for torch 2.2 users
    GradScaler,  # loss scaling
    autocast,  # reduced-precision forward
)


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = GradScaler(init_scale=2.0 ** 12)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with autocast(dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.amp.autocast("cpu", dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses
