# fixsafety: kind=correct defect=7
"""Correct: the forward runs under autocast and the backward inside an explicitly disabled
inner region `with torch.autocast(device_type, enabled=False):` (autocast is off there).
Issue 11 defect 7: reported as a backward inside autocast (AMP002)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
            with torch.autocast(device_type, enabled=False):
                scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
