"""A DistributedDataParallel script for torchrun (gloo, CPU) with one AMP misuse on every rank:
clip_grad_norm_ before scaler.unscale_ (AMP006)."""

import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    g = torch.Generator().manual_seed(rank)
    for step in range(int(os.environ.get("STEPS", "3"))):
        x, y = torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <clip>
        scaler.step(optimizer)
        scaler.update()
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
