# fixsafety: kind=correct
"""Correct: one code path for AMP on and off, `GradScaler(dev, enabled=use_amp)` and
`autocast(..., enabled=use_amp)`; a disabled scaler passes everything through."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    scaler = torch.amp.GradScaler(device_type, enabled=use_amp)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
