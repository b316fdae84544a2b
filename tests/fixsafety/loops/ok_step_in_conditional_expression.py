# fixsafety: kind=correct
"""Correct: the step chosen in an expression statement,
`scaler.step(optimizer) if use_amp else optimizer.step()`, and the update guarded likewise."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        (scaler.scale(loss) if use_amp else loss).backward()
        scaler.step(optimizer) if use_amp else optimizer.step()
        if use_amp:
            scaler.update()
        losses.append(loss.item())
    return losses
