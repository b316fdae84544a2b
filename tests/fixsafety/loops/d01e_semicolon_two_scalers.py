# fixsafety: kind=misuse codes=AMP003 defect=1
"""A main loss and an auxiliary loss, each with its own GradScaler, built on one line
`s1 = GradScaler(device_type); s2 = GradScaler(device_type)`; both scalers step the same
optimizer (AMP003: it steps twice per iteration). Issue 11 defect 1: the unsafe fix deletes the
extra construction by deleting the line, and with it `s1`."""

import torch
from torch.amp import GradScaler


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    s1 = GradScaler(device_type); s2 = GradScaler(device_type)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            out = model(x)
            main = loss_fn(out, y)
            aux = 0.01 * out.float().pow(2).mean()
        s1.scale(main).backward(retain_graph=True)
        s2.scale(aux).backward()
        s1.step(optimizer)
        s2.step(optimizer)
        s1.update()
        s2.update()
        losses.append(main.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    s1 = GradScaler(device_type)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            out = model(x)
            main = loss_fn(out, y)
            aux = 0.01 * out.float().pow(2).mean()
        s1.scale(main).backward(retain_graph=True)
        s1.scale(aux).backward()
        s1.step(optimizer)
        s1.update()
        losses.append(main.item())
    return losses
