# fixsafety: kind=misuse codes=AMP004 defect=2
"""The scaler exists only when AMP is on (`GradScaler(dev) if use_amp else None`); the backward
is guarded with `if grad_scaler is not None: ... else: loss.backward()` but the step is a plain
`optimizer.step()` (AMP004 when AMP is on). Issue 11 defect 2: the fix emits an unguarded
`grad_scaler.step(optimizer)`, an AttributeError on None when AMP is off (the bf16 run here)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    grad_scaler = torch.amp.GradScaler(device_type) if use_amp else None
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        if grad_scaler is not None:
            grad_scaler.scale(loss).backward()
        else:
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    grad_scaler = torch.amp.GradScaler(device_type) if use_amp else None
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        if grad_scaler is not None:
            grad_scaler.scale(loss).backward()
        else:
            loss.backward()
        if grad_scaler is not None:
            grad_scaler.step(optimizer)
            grad_scaler.update()
        else:
            optimizer.step()
        losses.append(loss.item())
    return losses
