# fixsafety: kind=correct defect=7
"""Correct: a floor on the loss scale. After the iteration's real `scaler.update()`,
`if scaler.get_scale() < MIN_SCALE: scaler.update(MIN_SCALE)` only replaces the scale (torch
documents `update(new_scale)`). Issue 11 defect 7: reported as a repeated update (AMP007) and
the fix deletes the real update, so the next step raises."""

import torch

MIN_SCALE = 40000.0


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() < MIN_SCALE:
            scaler.update(MIN_SCALE)
        losses.append(loss.item())
    return losses
