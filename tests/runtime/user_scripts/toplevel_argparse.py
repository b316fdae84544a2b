"""A correct script whose loop runs in its `if __name__ == "__main__":` block (argparse defaults)."""

import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")

if __name__ == "__main__":
    args = parser.parse_args()
    device = args.device
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scaler = torch.amp.GradScaler(device)
    data = TensorDataset(torch.randn(512, 8), torch.randint(0, 4, (512,)))
    train_loader = DataLoader(data, batch_size=64, shuffle=True)
    for epoch in range(args.epochs):
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device, dtype=torch.float16):
                loss = F.cross_entropy(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(f"epoch {epoch}: {loss.item():.4f}")
    torch.save(model.state_dict(), "toplevel_argparse_model.pt")
