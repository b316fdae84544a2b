"""Shared by tests/integrations (a unique module name: pytest imports test dirs by basename)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.dirname(sys.executable)

# A training loop that misses `scaler.update()`: one AMP001 finding with a safe fix.
MISUSE = '''import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
'''
FIXED = MISUSE + "    scaler.update()\n"


def run_amplint(*args, cwd=None, input=None, env=None):
    """The real entry point (`python -m amplint`), without the cache or env overrides."""
    e = dict(os.environ)
    for k in ("AMPLINT_OUTPUT_FORMAT", "AMPLINT_CACHE_DIR"):
        e.pop(k, None)
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "amplint", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=e,
        timeout=120,
    )
