# fixsafety: kind=correct
"""Correct: `optimizer_step` keeps the step's return value, updates, and returns it
(`out = self.scaler.step(self.optimizer); self.scaler.update(); return out`)."""

import torch


class AmpStepper:
    def __init__(self, optimizer, scaler):
        self.optimizer = optimizer
        self.scaler = scaler

    def optimizer_step(self):
        out = self.scaler.step(self.optimizer); self.scaler.update()
        return out


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    stepper = AmpStepper(optimizer, scaler)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        stepper.optimizer_step()
        losses.append(loss.item())
    return losses
