"""A loop that reads the top-level `args` (argparse) inside the function."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--clip", type=float, default=1.0)
args = parser.parse_args()


def train(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        scaler.step(optimizer)
        scaler.update()
