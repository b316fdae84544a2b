# fixsafety: kind=correct defect=7
"""Correct: the gradient norm is logged from the scaled gradients and unscaled by hand,
`get_total_norm(grads) / scaler.get_scale()`; nothing is clipped and `scaler.step` unscales.
Issue 11 defect 7: reported as a norm before unscale_ (AMP006) and the fix inserts `unscale_`,
which changes the logged value (it is then divided by the scale twice)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses, grad_norms = [], []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        total_norm = torch.nn.utils.get_total_norm(grads) / scaler.get_scale()
        grad_norms.append(float(total_norm))
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses + grad_norms
