# fixsafety: kind=misuse codes=AMP006
"""A multi-line clip call with comments on its arguments, whose result is logged, before
`unscale_` (AMP006). The fix must insert the unscale_ above the statement and keep the
comments."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses, norms = [], []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            model.parameters(),  # every parameter
            max_norm=5.0,  # generous: only catches spikes
        )
        norms.append(float(grad_norm))
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses + norms


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses, norms = [], []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(
            model.parameters(),  # every parameter
            max_norm=5.0,  # generous: only catches spikes
        )
        norms.append(float(grad_norm))
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses + norms
