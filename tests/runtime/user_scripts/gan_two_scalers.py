"""A correct GAN loop with one GradScaler per optimizer."""

import torch
import torch.nn.functional as F


def train_gan(netG, netD, opt_g, opt_d, scaler_g, scaler_d, loader, device="cpu"):
    for real, _ in loader:
        z = torch.randn(real.shape[0], 8, device=device)
        opt_d.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            fake = netG(z)
            d_loss = F.binary_cross_entropy_with_logits(netD(real), torch.ones(real.shape[0], 1)) + \
                F.binary_cross_entropy_with_logits(netD(fake.detach()), torch.zeros(real.shape[0], 1))
        scaler_d.scale(d_loss).backward()
        scaler_d.step(opt_d)
        scaler_d.update()
        opt_g.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            g_loss = F.binary_cross_entropy_with_logits(netD(fake), torch.ones(real.shape[0], 1))
        scaler_g.scale(g_loss).backward()
        scaler_g.step(opt_g)
        scaler_g.update()
