"""Definitions, then a top-level sys.exit (python sysexit_train.py would stop there)."""

import sys

import torch

LOG_EVERY = 10
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def train_step(model, batch, optimizer, scaler, loss_fn):
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(DEVICE, dtype=torch.float16):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def main():
    print("main ran")
    return 0


sys.exit(main())
