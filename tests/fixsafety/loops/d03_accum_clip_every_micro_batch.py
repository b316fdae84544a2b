# fixsafety: kind=misuse codes=AMP006 defect=3
"""Gradient accumulation over 3 micro-batches with the step under `if (i + 1) % accum == 0:`,
but the clip runs on every micro-batch, on scaled gradients (AMP006). Issue 11 defect 3: the
fix inserts a per-micro-batch `unscale_`, and the second micro-batch raises
"unscale_() has already been called on this optimizer since the last update()"."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 3
    losses = []
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item() * accum)
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 3
    losses = []
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item() * accum)
    return losses
