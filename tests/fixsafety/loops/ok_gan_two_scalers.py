# fixsafety: kind=correct
"""Correct: GAN-style alternating updates, the "discriminator" (first layer) and "generator"
(last layer) each with its own optimizer and its own scaler, each scaled, stepped and updated
once per iteration on its own loss."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    opt_d = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)
    opt_g = torch.optim.SGD(model[2].parameters(), lr=0.05, momentum=0.9)
    scaler_d = torch.amp.GradScaler(device_type)
    scaler_g = torch.amp.GradScaler(device_type)
    losses = []
    for x, y in batches:
        opt_d.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            d_loss = loss_fn(model(x), y)
        scaler_d.scale(d_loss).backward()
        scaler_d.step(opt_d)
        scaler_d.update()

        opt_g.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            g_loss = loss_fn(model(x), y)
        scaler_g.scale(g_loss).backward()
        scaler_g.step(opt_g)
        scaler_g.update()
        losses.append(g_loss.item())
    return losses
