"""Top-level argparse (parsed at import time, as many scripts do) and a clean training loop."""

import argparse

import torch

parser = argparse.ArgumentParser(description="train")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()


def train_loop(model, loader, optimizer, scaler, epochs, device="cuda"):
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device, dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


if __name__ == "__main__":
    net = torch.nn.Linear(8, 1)
    train_loop(net, [], torch.optim.SGD(net.parameters(), lr=args.lr), torch.amp.GradScaler(), args.epochs)
