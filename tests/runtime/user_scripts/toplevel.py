"""A tutorial-style script: everything runs at the top level."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(64, 8), torch.randn(64, 1)
for epoch in range(3):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    print("epoch", epoch, loss.item())
with open("toplevel_ran.txt", "w") as f:
    f.write("the top level ran\n")
