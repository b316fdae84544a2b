# fixsafety: kind=misuse codes=AMP009 defect=1
"""`scaler.scale(loss).backward(); optimizer.zero_grad()` on one line: the gradients are erased
before `scaler.step` (AMP009; with set_to_none the step raises "No inf checks were recorded for
this optimizer"). Issue 11 defect 1: the unsafe fix moves the zero_grad by moving the whole
line, deleting the backward."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    seen = []
    for step, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward(); optimizer.zero_grad()
        scaler.step(optimizer)
        scaler.update()
        seen.append(loss.item())
    return seen


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    seen = []
    for step, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        seen.append(loss.item())
    return seen
