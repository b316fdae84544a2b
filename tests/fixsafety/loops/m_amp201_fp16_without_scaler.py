# fixsafety: kind=misuse codes=AMP201
"""A CUDA float16 autocast loop with no GradScaler anywhere in the file (AMP201; on this CPU-only
box CUDA autocast is off). Written as a GPU user would; the harness's own scaler is ignored."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    grad_scaler = torch.amp.GradScaler("cuda")
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
        losses.append(loss.item())
    return losses
