# fixsafety: kind=correct
"""A bfloat16 autocast held in a variable: no GradScaler is needed, nothing to report."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    ctx = torch.autocast("cuda", dtype=torch.bfloat16)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with ctx:
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
