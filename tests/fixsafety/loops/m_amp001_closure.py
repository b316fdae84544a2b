# fixsafety: kind=misuse codes=AMP001
"""The forward and scaled backward live in a closure (`def closure(): ...`), called before
`scaler.step(optimizer)`; the update is missing (AMP001)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    history = []
    for x, y in batches:

        def closure():
            optimizer.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            return loss

        loss = closure()
        scaler.step(optimizer)
        history.append(loss.item())
    return history


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    history = []
    for x, y in batches:

        def closure():
            optimizer.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            return loss

        loss = closure()
        scaler.step(optimizer)
        scaler.update()
        history.append(loss.item())
    return history
