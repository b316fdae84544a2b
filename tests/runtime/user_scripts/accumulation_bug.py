"""Gradient accumulation with step + update every micro-batch (amp-facts §3 l): silent."""

import torch


def train_loop(model, loader, optimizer, scaler, loss_fn, accum_steps=2, device_type="cuda"):
    for i, (x, y) in enumerate(loader):
        with torch.autocast(device_type, dtype=torch.float16):
            loss = loss_fn(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if (i + 1) % accum_steps == 0:
            optimizer.zero_grad(set_to_none=True)
