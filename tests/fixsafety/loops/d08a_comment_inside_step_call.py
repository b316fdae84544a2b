# fixsafety: kind=misuse codes=AMP004 defect=8
"""A plain `optimizer.step(` with a comment inside its parentheses after a scaled backward
(AMP004: the step applies gradients still multiplied by the scale). Issue 11 defect 8: the fix
rewrites the call and loses the comment."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.step(
            # TODO(perf): pass a closure once we try LBFGS here
        )
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(
            optimizer,
            # TODO(perf): pass a closure once we try LBFGS here
        )
        scaler.update()
        losses.append(loss.item())
    return losses
