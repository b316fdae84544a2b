# fixsafety: kind=correct
"""Correct: a helper that steps and then returns the update's value,
`scaler.step(opt); return scaler.update()`."""

import torch


def finish_step(scaler, opt):
    scaler.step(opt)
    return scaler.update()


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        finish_step(scaler, optimizer)
        losses.append(loss.item())
    return losses
