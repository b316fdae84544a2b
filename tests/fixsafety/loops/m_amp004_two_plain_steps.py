# fixsafety: kind=misuse codes=AMP004
"""Two optimizers stepped directly after one scaled backward, then one update (AMP004 twice).
The correct version steps both through the scaler and keeps a single update after them."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    enc = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    dec = torch.optim.SGD(model[2].parameters(), lr=0.02)
    losses = []
    for x, y in batches:
        enc.zero_grad()
        dec.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        enc.step()
        dec.step()
        scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    enc = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    dec = torch.optim.SGD(model[2].parameters(), lr=0.02)
    losses = []
    for x, y in batches:
        enc.zero_grad()
        dec.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(enc)
        scaler.step(dec)
        scaler.update()
        losses.append(loss.item())
    return losses
