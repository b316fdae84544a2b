# fixsafety: kind=misuse codes=AMP201
"""functools.partial(torch.autocast, "cuda", dtype=torch.float16) called in the loop, with no
GradScaler anywhere in the file (AMP201)."""

import functools

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp = functools.partial(torch.autocast, "cuda", dtype=torch.float16)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with amp():
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    amp = functools.partial(torch.autocast, "cuda", dtype=torch.float16)
    grad_scaler = torch.amp.GradScaler("cuda")
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with amp():
            loss = loss_fn(model(x), y)
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
        losses.append(loss.item())
    return losses
