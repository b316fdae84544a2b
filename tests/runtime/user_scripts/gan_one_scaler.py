"""A correct GAN step loop: two optimizers (generator/discriminator), one GradScaler."""

import torch
import torch.nn.functional as F


def train_gan(generator, discriminator, g_opt, d_opt, scaler, loader, device="cpu"):
    for real, _ in loader:
        z = torch.randn(real.shape[0], 8, device=device)
        d_opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            fake = generator(z)
            d_loss = F.binary_cross_entropy_with_logits(discriminator(real), torch.ones(real.shape[0], 1)) + \
                F.binary_cross_entropy_with_logits(discriminator(fake.detach()), torch.zeros(real.shape[0], 1))
        scaler.scale(d_loss).backward()
        scaler.step(d_opt)
        g_opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), torch.ones(real.shape[0], 1))
        scaler.scale(g_loss).backward()
        scaler.step(g_opt)
        scaler.update()
