# fixsafety: kind=misuse codes=AMP202
"""`model.half()` with an optimizer stepped through the GradScaler (AMP202, no fix: the first
step raises "Attempting to unscale FP16 gradients")."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    model.half()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    try:
        for x, y in batches:
            opt.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x.half()).float(), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
    finally:
        model.float()
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    model.float()
    return losses
