"""A classifier written as PyTorch's AMP recipe: F.cross_entropy inline (issue 32)."""
import torch
import torch.nn.functional as F


def train(model, loader, optimizer, scaler, device="cuda"):
    for inputs, labels in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.float16):
            logits = model(inputs)
            loss = F.cross_entropy(logits, labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
