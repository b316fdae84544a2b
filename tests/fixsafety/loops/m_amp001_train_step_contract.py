# fixsafety: kind=misuse codes=AMP001
"""A per-batch `train_step` that steps through the scaler but never updates it (AMP001): the
second call raises "step() has already been called since the last update()"."""

import torch


def train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    inputs, labels = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        logits = model(inputs)
        loss = loss_fn(logits, labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss.item()


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    inputs, labels = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        logits = model(inputs)
        loss = loss_fn(logits, labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
