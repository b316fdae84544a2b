# fixsafety: kind=correct
"""Correct: optimizers in a dict; unscale_ and clip in one loop over them, steps in another,
and the single update after the loops."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    optimizers = {
        "body": torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9),
        "head": torch.optim.SGD(model[2].parameters(), lr=0.05),
    }
    losses = []
    for x, y in batches:
        for opt in optimizers.values():
            opt.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        for name, opt in optimizers.items():
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
        for opt in optimizers.values():
            scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses
