# fixsafety: kind=correct
"""Correct: a hand-written linear warm-up of the learning rate over the first 4 steps via
`param_groups`, then the canonical AMP step."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    base_lr = optimizer.param_groups[0]["lr"]
    warmup = 4
    losses = []
    for it, (x, y) in enumerate(batches):
        if it < warmup:
            for group in optimizer.param_groups:
                group["lr"] = base_lr * (it + 1) / warmup
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    for group in optimizer.param_groups:
        group["lr"] = base_lr
    return losses
