# fixsafety: kind=correct
"""Correct: a version guard, `try: from torch.amp import GradScaler` /
`except ImportError: from torch.cuda.amp import GradScaler` (the legacy name is the fallback)."""

import torch

try:
    from torch.amp import GradScaler
except ImportError:  # torch < 2.3
    from torch.cuda.amp import GradScaler


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    own = GradScaler(device_type)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        own.scale(loss).backward()
        own.step(optimizer)
        own.update()
        losses.append(loss.item())
    return losses
