# fixsafety: kind=correct
"""Correct: a fairseq-style dynamic loss scaler of the project's own (`DynamicLossScaler` with
`scale_loss`, `unscale_grads`, `update_scale`), next to torch imports; not torch's GradScaler."""

import math

import torch


class DynamicLossScaler:
    def __init__(self, init_scale=2.0 ** 10, scale_window=4):
        self.loss_scale = init_scale
        self.scale_window = scale_window
        self._good = 0

    def scale_loss(self, loss):
        return loss * self.loss_scale

    def unscale_grads(self, params):
        finite = True
        for p in params:
            if p.grad is not None:
                p.grad.div_(self.loss_scale)
                finite = finite and bool(torch.isfinite(p.grad).all())
        return finite

    def update_scale(self, overflow):
        if overflow:
            self.loss_scale /= 2
            self._good = 0
        else:
            self._good += 1
            if self._good % self.scale_window == 0:
                self.loss_scale *= 2


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    scaler = DynamicLossScaler()
    params = list(model.parameters())
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale_loss(loss).backward()
        ok = scaler.unscale_grads(params)
        if ok:
            optimizer.step()
        scaler.update_scale(not ok)
        losses.append(loss.item() if math.isfinite(loss.item()) else None)
    return losses
