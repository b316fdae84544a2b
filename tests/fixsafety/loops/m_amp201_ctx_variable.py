# fixsafety: kind=misuse codes=AMP201
"""A CUDA float16 autocast held in a variable (one arm of a conditional) and entered in the
loop, with no GradScaler anywhere in the file (AMP201). The unsafe fix adds the scaler; the
`with ctx:` stays as it is."""

import contextlib

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = True
    ctx = torch.autocast("cuda", dtype=torch.float16) if use_amp else contextlib.nullcontext()
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with ctx:
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = True
    ctx = torch.autocast("cuda", dtype=torch.float16) if use_amp else contextlib.nullcontext()
    grad_scaler = torch.amp.GradScaler("cuda")
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with ctx:
            loss = loss_fn(model(x), y)
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
        losses.append(loss.item())
    return losses
