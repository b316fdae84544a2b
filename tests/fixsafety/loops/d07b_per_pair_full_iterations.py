# fixsafety: kind=correct defect=7
"""Correct: multi-task training where each (optimizer, loss) pair is a complete scaler
iteration: zero_grad, scaled backward, unscale_, clip, step, update. One update per pair is
right here: each pair's gradients were scaled with the scale of that pair. Issue 11 defect 7:
reported as AMP007 and the fix moves the update after the pair loop (changing the scale history
and unscaling the second pair's gradients with the wrong scale)."""

import torch


def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
    lr = optimizer.param_groups[0]["lr"]
    body_opt = torch.optim.SGD(model[0].parameters(), lr=lr, momentum=0.9)
    head_opt = torch.optim.SGD(model[2].parameters(), lr=lr, momentum=0.9)
    losses = []
    for x, y in batches:
        with torch.autocast(device_type, dtype=dtype):
            pred = model(x)
            task_losses = (loss_fn(pred, y), 0.5 * loss_fn(pred, torch.zeros_like(y)))
        for k, (opt, task_loss) in enumerate(zip((body_opt, head_opt), task_losses)):
            opt.zero_grad(set_to_none=True)
            scaler.scale(task_loss).backward(retain_graph=k == 0)
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
            scaler.step(opt)
            scaler.update()
        losses.append(task_losses[0].item())
    return losses
