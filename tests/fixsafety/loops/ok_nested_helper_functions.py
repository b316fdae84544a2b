# fixsafety: kind=correct
"""Correct: inner functions `backward(loss)` and `step()` defined in the loop function; the
scaler is a closure variable."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    def backward(loss):
        scaler.scale(loss).backward()

    def step():
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        backward(loss)
        step()
        losses.append(loss.item())
    return losses
