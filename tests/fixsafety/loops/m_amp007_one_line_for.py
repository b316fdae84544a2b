# fixsafety: kind=misuse codes=AMP007
"""The same loop over optimizers written as a one-line suite,
`for opt in optimizers: scaler.step(opt); scaler.update()` (AMP007)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    optimizers = (
        torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9),
        torch.optim.Adam(model[2].parameters(), lr=1e-3),
    )
    losses = []
    for x, y in batches:
        for opt in optimizers: opt.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        for opt in optimizers: scaler.step(opt); scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    optimizers = (
        torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9),
        torch.optim.Adam(model[2].parameters(), lr=1e-3),
    )
    losses = []
    for x, y in batches:
        for opt in optimizers: opt.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        for opt in optimizers: scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses
