# fixsafety: kind=correct defect=7
"""Correct: a project's own static loss scaler that happens to be called `GradScaler`; the file
never imports torch. Its `step` unscales and steps; it has no `update` method. Issue 11 defect 7:
reported as a missing update (AMP001) and the fix calls `update()`, which does not exist."""


class GradScaler:
    """Static loss scaling for the fp32 reference trainer (not torch's GradScaler)."""

    def __init__(self, factor=1024.0):
        self.factor = factor

    def scale(self, loss):
        return loss * self.factor

    def step(self, optimizer):
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.div_(self.factor)
        optimizer.step()


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    static_scaler = GradScaler(1024.0)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        static_scaler.scale(loss).backward()
        static_scaler.step(optimizer)
        losses.append(loss.item())
    return losses
