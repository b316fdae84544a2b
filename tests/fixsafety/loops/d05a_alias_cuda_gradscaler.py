# fixsafety: kind=misuse codes=AMP101 defect=5
"""A module-level alias of the legacy scaler, `GS = torch.cuda.amp.GradScaler`, called as
`GS(4096.0, enabled=use_amp)` (AMP101). Without CUDA the legacy scaler disables itself.
Issue 11 defect 5: the fix rewrites the alias to `torch.amp.GradScaler`, whose first positional
parameter is the device, so the scaler gets device `4096.0`, stays enabled and starts at 65536."""

import torch

GS = torch.cuda.amp.GradScaler


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    amp_scaler = GS(4096.0, enabled=use_amp)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        amp_scaler.scale(loss).backward()
        amp_scaler.step(optimizer)
        amp_scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    use_amp = dtype == torch.float16
    amp_scaler = torch.amp.GradScaler("cuda", 4096.0, enabled=use_amp)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype, enabled=use_amp):
            loss = loss_fn(model(x), y)
        amp_scaler.scale(loss).backward()
        amp_scaler.step(optimizer)
        amp_scaler.update()
        losses.append(loss.item())
    return losses
