# fixsafety: kind=misuse codes=AMP004
"""A `train_step` whose last statements are `optimizer.step()` and a `return` of the loss;
the backward is scaled (AMP004)."""

import torch


def train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()
    return loss.item()


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
