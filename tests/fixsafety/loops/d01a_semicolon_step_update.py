# fixsafety: kind=misuse codes=AMP007 defect=1
"""Encoder and head stepped by separate optimizers, each `step` followed by an `update` on the
same line (`scaler.step(enc_opt); scaler.update()`). The first update is one too many (AMP007).
Issue 11 defect 1: the fix removes that update by deleting the whole line, step included."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    lr = optimizer.param_groups[0]["lr"]
    enc_opt = torch.optim.SGD(model[0].parameters(), lr=lr, momentum=0.9)
    head_opt = torch.optim.SGD(model[2].parameters(), lr=lr, momentum=0.9)
    history = []
    for x, y in batches:
        enc_opt.zero_grad(set_to_none=True)
        head_opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(enc_opt); scaler.update()
        scaler.step(head_opt); scaler.update()
        history.append(loss.item())
    return history


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    lr = optimizer.param_groups[0]["lr"]
    enc_opt = torch.optim.SGD(model[0].parameters(), lr=lr, momentum=0.9)
    head_opt = torch.optim.SGD(model[2].parameters(), lr=lr, momentum=0.9)
    history = []
    for x, y in batches:
        enc_opt.zero_grad(set_to_none=True)
        head_opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(enc_opt)
        scaler.step(head_opt)
        scaler.update()
        history.append(loss.item())
    return history
