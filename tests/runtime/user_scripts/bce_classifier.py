"""A binary classifier with BCEWithLogitsLoss and float 0/1 labels (issue 32)."""
import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer, scaler):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.criterion = nn.BCEWithLogitsLoss()

    def train_epoch(self, loader):
        for x, y in loader:
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = self.criterion(self.model(x), y.float())
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
