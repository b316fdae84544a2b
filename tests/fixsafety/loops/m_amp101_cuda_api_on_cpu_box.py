# fixsafety: kind=misuse codes=AMP101
"""The legacy CUDA API written for a GPU box, `torch.cuda.amp.GradScaler(enabled=use_cuda)` and
`torch.cuda.amp.autocast(enabled=use_cuda)`, running on CPU where both are off (AMP101)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_cuda = torch.cuda.is_available()
    gpu_scaler = torch.cuda.amp.GradScaler(enabled=use_cuda)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.cuda.amp.autocast(enabled=use_cuda):
            loss = loss_fn(model(x), y)
        gpu_scaler.scale(loss).backward()
        gpu_scaler.step(optimizer)
        gpu_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_cuda = torch.cuda.is_available()
    gpu_scaler = torch.amp.GradScaler("cuda", enabled=use_cuda)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.amp.autocast("cuda", enabled=use_cuda):
            loss = loss_fn(model(x), y)
        gpu_scaler.scale(loss).backward()
        gpu_scaler.step(optimizer)
        gpu_scaler.update()
        losses.append(loss.item())
    return losses
