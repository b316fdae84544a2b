# fixsafety: kind=misuse codes=AMP003
"""A trainer that keeps `self.scaler` for the task loss and `self.reg_scaler` for a weight
penalty; both step the same optimizer (AMP003: two optimizer steps per iteration, the second on
gradients unscaled twice)."""

import torch


class Trainer:
    def __init__(self, model, optimizer, loss_fn, device_type, dtype):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.device_type, self.dtype = device_type, dtype
        self.scaler = torch.amp.GradScaler(device_type)
        self.reg_scaler = torch.amp.GradScaler(device_type)

    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device_type, dtype=self.dtype):
            loss = self.loss_fn(self.model(x), y)
        penalty = 1e-4 * sum(p.pow(2).sum() for p in self.model.parameters())
        self.scaler.scale(loss).backward()
        self.reg_scaler.scale(penalty).backward()
        self.scaler.step(self.optimizer)
        self.reg_scaler.step(self.optimizer)
        self.scaler.update()
        self.reg_scaler.update()
        return loss.item()


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    t = Trainer(model, optimizer, loss_fn, device_type, dtype)
    return [t.step(x, y) for x, y in batches]


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


class ExpectedTrainer(Trainer):
    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device_type, dtype=self.dtype):
            loss = self.loss_fn(self.model(x), y)
        penalty = 1e-4 * sum(p.pow(2).sum() for p in self.model.parameters())
        self.scaler.scale(loss).backward()
        self.scaler.scale(penalty).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    t = ExpectedTrainer(model, optimizer, loss_fn, device_type, dtype)
    return [t.step(x, y) for x, y in batches]
