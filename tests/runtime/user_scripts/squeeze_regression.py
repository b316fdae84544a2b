"""A regression loop that squeezes the model output to 1-D targets (issue 32)."""
import torch
import torch.nn.functional as F


def train(model, loader, optimizer, scaler, device="cuda"):
    for xb, yb in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.float16):
            pred = model(xb).squeeze(-1)
            loss = F.mse_loss(pred, yb)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
