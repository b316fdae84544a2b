"""A correct gradient-accumulation loop (loss / accum_steps, step + update every accum_steps)."""

import torch


def train_loop(model, loader, optimizer, scaler, loss_fn, accum_steps=2, device_type="cuda"):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(loader):
        with torch.autocast(device_type, dtype=torch.float16):
            loss = loss_fn(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        if (i + 1) % accum_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
