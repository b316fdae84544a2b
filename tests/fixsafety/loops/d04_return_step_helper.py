# fixsafety: kind=misuse codes=AMP001 defect=4
"""A trainer whose `optimizer_step` is `return self.scaler.step(self.optimizer)`: nothing ever
calls `update()` (AMP001; the second step raises). Issue 11 defect 4: the fix inserts the update
after the `return` (dead code), again on every pass, and warns that it did not converge."""

import torch


class Trainer:
    def __init__(self, model, optimizer, scaler, loss_fn, device_type, dtype):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.loss_fn = loss_fn
        self.device_type = device_type
        self.dtype = dtype

    def forward_backward(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device_type, dtype=self.dtype):
            loss = self.loss_fn(self.model(x), y)
        self.scaler.scale(loss).backward()
        return loss.detach()

    def optimizer_step(self):
        return self.scaler.step(self.optimizer)

    def fit(self, batches):
        losses = []
        for x, y in batches:
            loss = self.forward_backward(x, y)
            self.optimizer_step()
            losses.append(float(loss))
        return losses


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    return Trainer(model, optimizer, scaler, loss_fn, device_type, dtype).fit(batches)


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


class ExpectedTrainer(Trainer):
    def optimizer_step(self):
        out = self.scaler.step(self.optimizer)
        self.scaler.update()
        return out


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    return ExpectedTrainer(model, optimizer, scaler, loss_fn, device_type, dtype).fit(batches)
