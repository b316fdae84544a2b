# fixsafety: kind=misuse codes=AMP001 defect=10 write=hardlink,readonly
"""A plain missing `scaler.update()` (AMP001), also used by the write-semantics test: fixed
through one of two hard links the other name must see the new text (same inode), and a file
its owner cannot write (mode 0444) must be reported (E902, read-only) and left untouched, with
owner, group and mode kept. Issue 11 defect 10."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
