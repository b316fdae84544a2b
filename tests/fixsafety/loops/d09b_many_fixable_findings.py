# fixsafety: kind=misuse codes=AMP101,AMP006,AMP001,AMP004 defect=9
"""Several fixable findings in one file: a legacy `torch.cpu.amp.autocast`, a clip before
`unscale_`, a missing update, and a second helper with a plain `optimizer.step()` after a
scaled backward. Issue 11 defect 9: `check` says N fixable, `fix` must then fix N (and
`--diff` must say it would fix N)."""

import torch


def finetune_step(model, x, y, loss_fn, optimizer, scaler):
    with torch.cpu.amp.autocast(dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()
    scaler.update()
    return loss


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.cpu.amp.autocast(dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
