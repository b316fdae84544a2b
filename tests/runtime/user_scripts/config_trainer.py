"""A method whose parameter has no role verify can guess."""

import torch


class ConfigTrainer:
    def __init__(self, model, optimizer, scaler):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler

    def fit(self, loader, cfg):
        for _ in range(cfg.epochs):
            for x, y in loader:
                self.optimizer.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
