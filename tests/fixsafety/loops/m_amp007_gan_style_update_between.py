# fixsafety: kind=misuse codes=AMP007
"""Encoder/decoder with one shared backward and `step(enc); update(); step(dec); update()`
(AMP007: the decoder's gradients are unscaled with the updated scale)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt_enc = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    opt_dec = torch.optim.SGD(model[2].parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        opt_enc.zero_grad()
        opt_dec.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt_enc)
        scaler.update()
        scaler.step(opt_dec)
        scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt_enc = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    opt_dec = torch.optim.SGD(model[2].parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        opt_enc.zero_grad()
        opt_dec.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt_enc)
        scaler.step(opt_dec)
        scaler.update()
        losses.append(loss.item())
    return losses
