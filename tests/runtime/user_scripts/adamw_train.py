"""A correct loop; the script builds AdamW with its own settings."""
import torch
import torch.nn.functional as F
from torch.optim import AdamW


def train(model, loader, optimizer, scaler, device="cuda"):
    for inputs, targets in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.float16):
            loss = F.mse_loss(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()


def main():
    model = torch.nn.Linear(8, 1)
    optimizer = AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, betas=(0.9, 0.95))
    scaler = torch.amp.GradScaler("cuda")
    train(model, [], optimizer, scaler)
