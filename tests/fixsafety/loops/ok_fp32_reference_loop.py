# fixsafety: kind=correct
"""Correct: the fp32 reference loop (no autocast, no scaling) in a function that still receives
the harness's `scaler` parameter and ignores it."""


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
