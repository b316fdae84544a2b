# fixsafety: kind=correct
"""Correct: a helper `apply_gradients(scaler, optimizer, params, max_norm)` does unscale_,
clip, step and update; the loop only does the forward and the scaled backward."""

import torch


def apply_gradients(scaler, optimizer, params, max_norm=None):
    if max_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    params = [p for p in model.parameters() if p.requires_grad]
    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        apply_gradients(scaler, optimizer, params, max_norm=1.0)
        losses.append(loss.item())
    return losses
