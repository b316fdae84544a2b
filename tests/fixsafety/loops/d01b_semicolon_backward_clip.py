# fixsafety: kind=misuse codes=AMP006 defect=1
"""The scaled backward and the clip share a line:
`scaler.scale(loss).backward(); torch.nn.utils.clip_grad_norm_(...)`. The clip sees scaled
gradients (AMP006). Issue 11 defect 1: the fix inserts `unscale_` above the whole line, i.e.
before the backward ("Attempted unscale_ but _scale is None")."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    out = []
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        out.append(loss.item())
    return out


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    out = []
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        out.append(loss.item())
    return out
