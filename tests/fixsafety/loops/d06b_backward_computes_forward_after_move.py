# fixsafety: kind=misuse codes=AMP002 defect=6
"""Defect 6 in the shape where the fix is offered: the batch is moved to the device inside the
autocast block, then `scaler.scale(loss_fn(model(xb), yb) / 2).backward()` computes the forward
and the backward in one statement (AMP002). Moving that statement out of autocast runs the
forward in fp32; the correct fix keeps `loss = ...` inside and moves only the backward."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    for step, (xb, yb) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            xb = xb.to(device_type, non_blocking=True)
            scaler.scale(loss_fn(model(xb), yb) / 2).backward()
        scaler.step(optimizer)
        scaler.update()
    return None


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    for step, (xb, yb) in enumerate(batches):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            xb = xb.to(device_type, non_blocking=True)
            loss = loss_fn(model(xb), yb) / 2
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return None
