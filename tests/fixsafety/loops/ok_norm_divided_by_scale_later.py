# fixsafety: kind=correct
"""Correct: the gradient norm is read from the scaled gradients in one statement and divided by
the scale in a later one (`gn = gn / scaler.get_scale()`, or `/=` a name bound to the scale);
nothing is clipped and `scaler.step` unscales. Reported as AMP006 before, and the safe fix
inserted `unscale_`, which divided the logged norm by the scale twice."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses, norms = [], []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        gn = torch.norm(torch.stack([p.grad.norm(2) for p in model.parameters() if p.grad is not None]), 2)
        gn = gn / scaler.get_scale()
        total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        scale = scaler.get_scale()
        total /= scale
        norms.append(float(gn) + float(total))
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses + norms
