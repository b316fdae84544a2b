import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()


def train(model, loader, optimizer, scaler, accum_steps=2, device="cuda"):
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(loader):
        with torch.autocast(device, dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)) / accum_steps
        scaler.scale(loss).backward()
        if (i + 1) % accum_steps == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Linear(8, 1).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler()
    data = [(torch.randn(64, 8), torch.randn(64, 1)) for _ in range(100)]
    for _ in range(args.epochs):
        train(model, data, optimizer, scaler, device=device)
