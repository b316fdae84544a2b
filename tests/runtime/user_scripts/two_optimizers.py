"""One loss, two optimizers (body and head), one scaler: step both, then update once."""

import torch


def train_loop(model, loader, loss_fn, opt_body, opt_head, scaler, device_type="cuda", dtype=torch.float16):
    for x, y in loader:
        opt_body.zero_grad(set_to_none=True)
        opt_head.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt_body)
        scaler.step(opt_head)
        scaler.update()
