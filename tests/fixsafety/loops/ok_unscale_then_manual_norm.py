# fixsafety: kind=correct
"""Correct: `unscale_` first, then a gradient norm computed by hand from `p.grad.norm()` for
logging, then step and update."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses, norms = [], []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]).norm()
        norms.append(float(norm))
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses + norms
