# fixsafety: kind=correct
"""Correct: a skipped step is detected by comparing `get_scale()` before and after `update()`,
and the LR scheduler steps only when the optimizer did."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    sched = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scale_before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() >= scale_before:
            sched.step()
        losses.append(loss.item())
    return losses
