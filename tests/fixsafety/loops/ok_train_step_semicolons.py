# fixsafety: kind=correct
"""Correct: a `train_step` with the forward on one line inside autocast and the tail on one
line, zero_grad last."""

import torch


def train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    with torch.autocast(device_type=device_type, dtype=dtype):
        pred = model(batch[0]); loss = loss_fn(pred, batch[1])
    scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update(); optimizer.zero_grad(set_to_none=True)
    return loss.item()
