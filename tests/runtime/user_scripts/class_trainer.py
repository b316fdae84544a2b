"""A Trainer class: the scaler and the loss live on self; fit() calls train_step()."""

import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer, device="cuda", clip=1.0):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.device = device
        self.scaler = torch.amp.GradScaler(device)
        self.criterion = nn.MSELoss()
        self.clip = clip
        self.history = []

    def train_step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device, dtype=torch.float16):
            loss = self.criterion(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()

    def fit(self, loader, epochs=10):
        for _ in range(epochs):
            for x, y in loader:
                self.history.append(self.train_step(x.to(self.device), y.to(self.device)))
        return self.history


if __name__ == "__main__":
    net = nn.Linear(8, 1)
    Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1)).fit([])
