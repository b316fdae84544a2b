# fixsafety: kind=misuse codes=AMP001
"""Epochs over a slice of the batches, with a learning-rate scheduler after the step and no
`scaler.update()` (AMP001)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    epochs = 2
    per_epoch = len(batches) // epochs
    sched = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
    losses = []
    for epoch in range(epochs):
        model.train()
        for batch_idx in range(per_epoch):
            data, target = batches[epoch * per_epoch + batch_idx]
            optimizer.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                output = model(data)
                loss = loss_fn(output, target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            sched.step()
            losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    epochs = 2
    per_epoch = len(batches) // epochs
    sched = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
    losses = []
    for epoch in range(epochs):
        model.train()
        for batch_idx in range(per_epoch):
            data, target = batches[epoch * per_epoch + batch_idx]
            optimizer.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                output = model(data)
                loss = loss_fn(output, target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            sched.step()
            losses.append(loss.item())
    return losses
