# fixsafety: kind=misuse codes=AMP101
"""A custom autograd Function decorated with the legacy `@torch.cuda.amp.custom_fwd` and
`@torch.cuda.amp.custom_bwd` (AMP101), used on the model output."""

import torch


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd
    def forward(ctx, x):
        out = torch.tanh(x) * 1.5
        ctx.save_for_backward(out)
        return out

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1.5 - out * out / 1.5)


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(ScaledTanh.apply(model(x)), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----


class _ExpectedScaledTanh(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, x):
        out = torch.tanh(x) * 1.5
        ctx.save_for_backward(out)
        return out

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1.5 - out * out / 1.5)


def expected_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(_ExpectedScaledTanh.apply(model(x)), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
