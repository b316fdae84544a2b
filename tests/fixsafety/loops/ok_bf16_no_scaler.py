# fixsafety: kind=correct
"""Correct: bfloat16 autocast needs no scaler; a plain backward and step (the harness's scaler
is deliberately unused)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
