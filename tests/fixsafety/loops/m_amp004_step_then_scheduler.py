# fixsafety: kind=misuse codes=AMP004
"""A plain `optimizer.step()` after the scaled backward, then the scheduler step; no update at
all (AMP004: the weights move 65536x too far)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    lr_sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + 0.1 * s))
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.step()  # apply the update
        lr_sched.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    lr_sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + 0.1 * s))
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # apply the update
        scaler.update()
        lr_sched.step()
        losses.append(loss.item())
    return losses
