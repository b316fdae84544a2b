"""Two optimizers with scaler.update() after each one's step (amp-facts §3 f2)."""

import torch


def train_loop(model, loader, loss_fn, optimizers, scaler, device_type="cuda", dtype=torch.float16):
    for x, y in loader:
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        for opt in optimizers:
            scaler.step(opt)
            scaler.update()
