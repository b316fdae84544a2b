"""Two real bugs (clip before unscale_, optimizer.step() bypassing the scaler) behind a
torch.cuda.amp.GradScaler(), which disables itself on a machine without CUDA."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
x, y = torch.randn(8, 4), torch.randn(8, 1)
for _ in range(3):
    optimizer.zero_grad()
    with torch.cuda.amp.autocast():
        loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
print("trained")
