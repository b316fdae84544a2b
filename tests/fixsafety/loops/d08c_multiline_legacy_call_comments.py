# fixsafety: kind=misuse codes=AMP101 defect=8
"""A multi-line `torch.cpu.amp.GradScaler(` call with a comment on each argument (AMP101).
Issue 11 defect 8: comments inside rewritten calls must survive and the call must not be
re-indented oddly."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = torch.cpu.amp.GradScaler(
        init_scale=2.0 ** 10,  # small start: our losses are large
        growth_interval=3,  # grow fast in this short run
    )
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    cpu_scaler = torch.amp.GradScaler(
        "cpu",
        init_scale=2.0 ** 10,  # small start: our losses are large
        growth_interval=3,  # grow fast in this short run
    )
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        cpu_scaler.scale(loss).backward()
        cpu_scaler.step(optimizer)
        cpu_scaler.update()
        losses.append(loss.item())
    return losses
