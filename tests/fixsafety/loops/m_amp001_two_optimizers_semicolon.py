# fixsafety: kind=misuse codes=AMP001
"""Two optimizers (SGD for the body, Adam for the head) stepped on one line,
`scaler.step(opt_body); scaler.step(opt_head)`, with no update (AMP001). The update belongs
after the last step, not between them."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt_body = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    opt_head = torch.optim.Adam(model[2].parameters(), lr=1e-3)
    losses = []
    for x, y in batches:
        opt_body.zero_grad(); opt_head.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt_body); scaler.step(opt_head)
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt_body = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    opt_head = torch.optim.Adam(model[2].parameters(), lr=1e-3)
    losses = []
    for x, y in batches:
        opt_body.zero_grad(); opt_head.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt_body); scaler.step(opt_head)
        scaler.update()
        losses.append(loss.item())
    return losses
