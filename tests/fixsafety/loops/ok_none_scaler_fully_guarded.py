# fixsafety: kind=correct
"""Correct: `scaler = GradScaler(dev) if use_amp else None`, with both the backward and the step
guarded by `if scaler is not None:` (plain backward/step otherwise)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    scaler = torch.amp.GradScaler(device_type) if use_amp else None
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    return losses
