# fixsafety: kind=correct
"""Correct: a second, fp32 model with its own optimizer. Its loss is back-propagated unscaled
(outside autocast) before the AMP backward, the scaler steps and updates the AMP optimizer, and
the fp32 optimizer is stepped plainly, as fp32 training does. Reported as AMP004 before, and the
safe fix rewrote `opt_aux.step()` to `scaler.step(opt_aux)` after the update, which divides the
fp32 gradients by the scale."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    aux = opt_aux = None
    losses = []
    for x, y in batches:
        if aux is None:
            torch.manual_seed(1)
            aux = torch.nn.Linear(x.shape[-1], 1)
            opt_aux = torch.optim.SGD(aux.parameters(), lr=0.05)
        optimizer.zero_grad(set_to_none=True)
        opt_aux.zero_grad(set_to_none=True)
        aux_loss = (aux(x.float()) - y.float()).pow(2).mean()
        aux_loss.backward()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        opt_aux.step()
        losses.append(loss.item())
        losses.append(aux_loss.item())
    return losses
