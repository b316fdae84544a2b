# fixsafety: kind=correct
"""Correct: the canonical loop with comments on every line, inside calls and between the
statements of the AMP tail."""

import torch  # the one import


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []  # per-step losses
    for x, y in batches:  # one pass
        # reset gradients first
        optimizer.zero_grad(
            set_to_none=True,  # cheaper than zeroing
        )
        with torch.autocast(
            device_type,  # cpu here
            dtype=dtype,  # fp16 or bf16
        ):
            loss = loss_fn(model(x), y)  # forward under autocast
        # backward outside autocast, scaled
        scaler.scale(loss).backward()  # scaled grads
        scaler.unscale_(optimizer)  # real grads from here on
        torch.nn.utils.clip_grad_norm_(
            model.parameters(),  # all of them
            1.0,  # max norm
        )
        scaler.step(
            optimizer,  # skips on inf
        )
        scaler.update()  # once per iteration
        losses.append(loss.item())  # log
    return losses  # done
