# fixsafety: kind=misuse codes=AMP006
"""A trainer class whose `optimizer_step` clips and then steps through the scaler, without
`unscale_` (AMP006, across methods: the backward happens in `backward`)."""

import torch


class Trainer:
    max_norm = 1.0

    def __init__(self, model, optimizer, scaler, loss_fn):
        self.model, self.optimizer, self.scaler, self.loss_fn = model, optimizer, scaler, loss_fn

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def optimizer_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    trainer = Trainer(model, optimizer, scaler, loss_fn)
    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        trainer.backward(loss)
        trainer.optimizer_step()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


class _ExpectedTrainer(Trainer):
    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    trainer = _ExpectedTrainer(model, optimizer, scaler, loss_fn)
    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        trainer.backward(loss)
        trainer.optimizer_step()
        losses.append(loss.item())
    return losses
