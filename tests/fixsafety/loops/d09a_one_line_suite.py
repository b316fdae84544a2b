# fixsafety: kind=misuse codes=AMP001 defect=9
"""Accumulation with the step in a one-line suite,
`if (i + 1) % accum == 0: scaler.step(optimizer); optimizer.zero_grad()`, and no update
(AMP001: the second step raises). Issue 11 defect 9: the finding is marked [*] but its fix is
never applied, so `amplint fix` keeps saying "1 fixable"."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 2
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0: scaler.step(optimizer); optimizer.zero_grad()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    accum = 2
    losses = []
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y) / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        losses.append(loss.item())
    return losses
