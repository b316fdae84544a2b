# fixsafety: kind=correct
"""Correct: accumulation over 4 micro-batches; unscale_, clip, step, update and zero_grad run
under the accumulation guard only."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accumulation_steps = 4
    losses = []
    optimizer.zero_grad(set_to_none=True)
    for step, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss / accumulation_steps).backward()
        if (step + 1) % accumulation_steps == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses
