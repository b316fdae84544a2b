"""Imports a sibling module at the top level and inside the function."""

import torch
from myutils import make_loss

CRITERION = make_loss()  # a top-level call: not run by verify; the function gets the harness loss


def train_loop(model, loader, optimizer, scaler, device_type="cuda"):
    from myutils import clip_value

    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=torch.float16):
            loss = CRITERION(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_value())
        scaler.step(optimizer)
        scaler.update()
    print("epoch done")
