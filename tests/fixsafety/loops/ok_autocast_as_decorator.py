# fixsafety: kind=correct
"""Correct: autocast applied as a decorator to the forward function
(`torch.autocast(device_type, dtype=dtype)(forward)`), backward outside it."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    @torch.autocast(device_type, dtype=dtype)
    def forward(x, y):
        return loss_fn(model(x), y)

    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = forward(x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
