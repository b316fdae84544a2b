# fixsafety: kind=correct
"""Correct: `Adam(fused=True)` (the scaler hands grad_scale/found_inf to the fused kernel
instead of unscaling) with the canonical order."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    adam = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    losses = []
    for x, y in batches:
        adam.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(adam)
        scaler.update()
        losses.append(loss.item())
    return losses
