"""Training in child processes: one started with multiprocessing's spawn method
(torch.multiprocessing.spawn) and one forked. Each child steps with a plain
optimizer.step() after a scaled backward (AMP004)."""

import multiprocessing

import torch
import torch.multiprocessing as tmp


def worker(rank):
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        opt.step()  # <bypass>


if __name__ == "__main__":
    tmp.spawn(worker, nprocs=1)  # spawn: a fresh interpreter
    p = multiprocessing.get_context("fork").Process(target=worker, args=(1,))
    p.start()
    p.join()
    print("parent done, fork exit code", p.exitcode)
