# fixsafety: kind=correct
"""Correct: two scaled backwards into the same gradients (`retain_graph=True` on the first),
then one step and one update."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            out = model(x)
            l1 = loss_fn(out, y)
            l2 = 0.5 * loss_fn(out, 0.9 * y)
        scaler.scale(l1).backward(retain_graph=True)
        scaler.scale(l2).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(l1.item())
    return losses
