# fixsafety: kind=misuse codes=AMP101 defect=1
"""`import torch; from torch.cuda.amp import GradScaler` on one line; the legacy CUDA scaler
(AMP101) is built by the loop itself (disabled without CUDA, as in a CPU smoke test).
Issue 11 defect 1: the AMP101 fix rewrites the line and drops `import torch`."""

import torch; from torch.cuda.amp import GradScaler


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    grad_scaler = GradScaler(enabled=torch.cuda.is_available())
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    grad_scaler = torch.amp.GradScaler("cuda", enabled=torch.cuda.is_available())
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
        losses.append(loss.item())
    return losses
