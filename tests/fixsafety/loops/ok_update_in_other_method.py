# fixsafety: kind=correct
"""Correct: a trainer whose `optimizer_step` returns `self.scaler.step(...)` and whose
`after_step` hook calls `self.scaler.update()`; `fit` calls both."""

import torch


class Trainer:
    def __init__(self, model, optimizer, scaler, loss_fn, device_type, dtype):
        self.model, self.optimizer, self.scaler, self.loss_fn = model, optimizer, scaler, loss_fn
        self.device_type, self.dtype = device_type, dtype

    def optimizer_step(self):
        return self.scaler.step(self.optimizer)

    def after_step(self):
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def fit(self, batches):
        losses = []
        for x, y in batches:
            with torch.autocast(self.device_type, dtype=self.dtype):
                loss = self.loss_fn(self.model(x), y)
            self.scaler.scale(loss).backward()
            self.optimizer_step()
            self.after_step()
            losses.append(loss.item())
        return losses


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    return Trainer(model, optimizer, scaler, loss_fn, device_type, dtype).fit(batches)
