"""Training loops used by the runtime tests: canonical ones and the classic AMP misuses.

Every loop follows the whole-loop contract
``(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype)`` unless its name ends in
``_step`` (per-iteration contract). ``# <tag>`` comments mark the lines the sanitizer must
point at.
"""

import inspect
import os

import torch


def line_of(obj_or_path, tag: str) -> int:
    """Line number of the line carrying the comment ``# <tag>`` in a module/file."""
    path = obj_or_path if isinstance(obj_or_path, (str, os.PathLike)) else inspect.getsourcefile(obj_or_path)
    with open(path, encoding="utf-8") as fh:
        for i, text in enumerate(fh, 1):
            if f"# <{tag}>" in text:
                return i
    raise LookupError(f"no '# <{tag}>' in {path}")


def good_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def good_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def good_clip_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def no_scaler_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    """bf16-style loop without a GradScaler: checks 3/4 do not apply."""
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# (a) no scaler.update()
def a_no_update_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # <a>
        losses.append(loss.item())
    return losses


# (b) scaled backward, plain optimizer.step()
def b_plain_step_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.step()  # <b>
        losses.append(loss.item())
    return losses


# (c) unscaled backward + scaler.step (scaler.scale used only for logging)
def c_unscaled_backward_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        logged = scaler.scale(loss).item()  # noqa: F841
        loss.backward()
        scaler.step(optimizer)  # <c>
        scaler.update()
        losses.append(loss.item())
    return losses


# (c, fresh scaler) unscaled backward + scaler.step, scale() never called: torch is loud
def c_fresh_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    loss.backward()
    scaler.step(optimizer)  # <c_fresh>
    scaler.update()
    return loss.item()


# (d) clip before unscale_
def d_clip_before_unscale_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <d>
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


# (h) backward inside autocast (numerically invisible)
def h_backward_in_autocast_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()  # <h>
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


# (g) two scalers, two losses, one optimizer
def g_two_scalers_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    scaler2 = torch.amp.GradScaler(device_type)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            out = model(x)
            loss1 = loss_fn(out[:32], y[:32])
            loss2 = loss_fn(out[32:], y[32:])
        scaler.scale(loss1).backward(retain_graph=True)
        scaler2.scale(loss2).backward()
        scaler.step(optimizer)
        scaler2.step(optimizer)  # <g>
        scaler.update()
        scaler2.update()
        losses.append((loss1.item() + loss2.item()) / 2)
    return losses


# (f) update() twice per iteration
def f_update_twice_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scaler.update()  # <f>
        losses.append(loss.item())
    return losses


# zero_grad between the scaled backward and scaler.step
def z_zero_grad_between_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.zero_grad(set_to_none=True)  # <z>
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


# (e) unscale_ twice
def e_unscale_twice_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.unscale_(optimizer)  # <e>
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


# (n) scaler.step twice in one iteration
def n_step_twice_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.step(optimizer)  # <n>
        scaler.update()
        losses.append(loss.item())
    return losses


def f2_two_optimizers(steps=3, device_type="cpu", dtype=torch.float16):
    """(f2) two optimizers, update() after each one's step; returns nothing."""
    torch.manual_seed(0)
    m1, m2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
    o1 = torch.optim.SGD(m1.parameters(), lr=0.1)
    o2 = torch.optim.SGD(m2.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device_type)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for _ in range(steps):
        o1.zero_grad()
        o2.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = torch.nn.functional.mse_loss(m2(m1(x)), y)
        scaler.scale(loss).backward()
        scaler.step(o1)
        scaler.update()  # <f2>
        scaler.step(o2)
        scaler.update()


def two_optimizers_ok(steps=3, device_type="cpu", dtype=torch.float16):
    """Canonical two losses / two optimizers / one scaler."""
    torch.manual_seed(0)
    m1, m2 = torch.nn.Linear(8, 1), torch.nn.Linear(8, 1)
    o1 = torch.optim.SGD(m1.parameters(), lr=0.1)
    o2 = torch.optim.SGD(m2.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device_type)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for _ in range(steps):
        o1.zero_grad()
        o2.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            l1 = torch.nn.functional.mse_loss(m1(x), y)
            l2 = torch.nn.functional.mse_loss(m2(x), y)
        scaler.scale(l1 + l2).backward()
        scaler.unscale_(o1)
        torch.nn.utils.clip_grad_norm_(m1.parameters(), 1.0)
        scaler.step(o1)
        scaler.step(o2)
        scaler.update()


def accumulation_ok(steps=8, n=4, device_type="cpu", dtype=torch.float16):
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 1)
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device_type)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for i in range(steps):
        if i % n == 0:
            o.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = torch.nn.functional.mse_loss(m(x), y)
        scaler.scale(loss / n).backward()
        if (i + 1) % n == 0:
            scaler.step(o)
            scaler.update()
