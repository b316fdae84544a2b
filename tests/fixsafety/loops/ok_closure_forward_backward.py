# fixsafety: kind=correct
"""Correct: a closure does zero_grad, forward under autocast and the scaled backward; the loop
calls it and then steps and updates (the closure is not passed to `scaler.step`)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:

        def closure():
            optimizer.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            return loss

        loss = closure()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
