"""A CUDA training script with two misuses: clip_grad_norm_ before scaler.unscale_ (AMP006) and
optimizer.step() instead of scaler.step(optimizer) (AMP004). Run by the cuda-marked tests and
benchmarks/cuda_check.sh (`amplint trace -- python cuda_train.py`); CLEAN=1 runs it correctly
(DEVICE=cpu: the same on the CPU, for the script's dry run)."""

import os

import torch

device = os.environ.get("DEVICE", "cuda")
clean = os.environ.get("CLEAN") == "1"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = torch.amp.GradScaler(device)
x, y = torch.randn(256, 8, device=device), torch.randn(256, 1, device=device)
for step in range(int(os.environ.get("STEPS", "20"))):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    if clean:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <clip>
        optimizer.step()  # <bypass>
print(f"final loss {loss.item():.4f}")
