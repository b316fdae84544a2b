# fixsafety: kind=correct
"""Correct: one backward, two optimizers (SGD and Adam over disjoint parameters), each
unscaled and clipped, both stepped, a single update."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt_a = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    opt_b = torch.optim.Adam(model[2].parameters(), lr=1e-3)
    losses = []
    for x, y in batches:
        opt_a.zero_grad(); opt_b.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt_a)
        torch.nn.utils.clip_grad_norm_(model[0].parameters(), 1.0)
        scaler.unscale_(opt_b)
        torch.nn.utils.clip_grad_norm_(model[2].parameters(), 1.0)
        scaler.step(opt_a)
        scaler.step(opt_b)
        scaler.update()
        losses.append(loss.item())
    return losses
