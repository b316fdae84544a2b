# fixsafety: kind=misuse codes=AMP002 defect=6
"""The backward statement also computes the forward:
`scaler.scale(loss_fn(model(xb), yb) / 2).backward()` inside autocast (AMP002). Issue 11
defect 6: the fix moves the whole statement out of autocast, so the forward runs in fp32.
The correct fix splits it: `loss = ...` stays inside, the backward moves out."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    for step, (xb, yb) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            scaler.scale(loss_fn(model(xb), yb) / 2).backward()
        scaler.step(optimizer)
        scaler.update()
    return None


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    for step, (xb, yb) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(xb), yb) / 2
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return None
