"""Latency of `amplint server` from a didChange to its publishDiagnostics, on a 2,000-line
training file (the median of 20 changes), through a real LSP client over stdio (pygls).

Each change is one incremental edit, as an editor sends it while typing: it deletes, then
restores, the `scaler.update()` of the file's last training loop, so every other change makes
an AMP001 finding appear and the next one clears it (the benchmark checks that it does).
Needs the server extra (`pip install '.[server]'` in a clone):

    python benchmarks/lsp_latency.py [--lines 2000] [--changes 20] [--debounce 0 0.3]

The latency includes the server's debounce (0.3 s by default, `amplint server --debounce`);
`--debounce 0` measures the analysis and the protocol alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

TRAINER = '''

class Trainer{i}:
    """Mixed-precision trainer number {i}."""

    def __init__(self, model, optimizer, loader, device="cuda", accum_steps=4, max_norm=1.0):
        self.model = model
        self.optimizer = optimizer
        self.loader = loader
        self.device = device
        self.accum_steps = accum_steps
        self.max_norm = max_norm
        self.scaler = torch.amp.GradScaler(device)
        self.history = []

    def train_epoch(self, epoch):
        self.model.train()
        total = 0.0
        for step, (x, y) in enumerate(self.loader):
            x, y = x.to(self.device), y.to(self.device)
            with torch.autocast(self.device, dtype=torch.float16):
                out = self.model(x)
                loss = F.cross_entropy(out, y) / self.accum_steps
            self.scaler.scale(loss).backward()
            if (step + 1) % self.accum_steps == 0:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad(set_to_none=True)
            total += loss.item()
        self.history.append(total)
        return total

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        correct = 0
        seen = 0
        for x, y in loader:
            with torch.autocast(self.device, dtype=torch.float16):
                out = self.model(x.to(self.device))
            correct += (out.argmax(-1) == y.to(self.device)).sum().item()
            seen += y.numel()
        return correct / max(seen, 1)

    def state_dict(self):
        return {{
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "history": list(self.history),
        }}

    def load_state_dict(self, state):
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.history = list(state["history"])


def train_{i}(model, optimizer, loader, epochs=1):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
    return model
'''

MODEL = '''

class Block{i}(nn.Module):
    """Residual MLP block number {i}."""

    def __init__(self, dim, hidden, dropout=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.norm(x)
        h = F.gelu(self.fc1(h))
        h = self.drop(self.fc2(h))
        return x + h


class Dataset{i}(torch.utils.data.Dataset):
    def __init__(self, n, dim, seed={i}):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x.sum(-1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


def accuracy_{i}(logits, target):
    pred = logits.argmax(dim=-1)
    return (pred == target).float().mean().item()


def cosine_lr_{i}(step, total, base=1e-3, warmup=100):
    if step < warmup:
        return base * step / max(warmup, 1)
    progress = (step - warmup) / max(total - warmup, 1)
    return 0.5 * base * (1.0 + math.cos(math.pi * progress))


def parse_args_{i}(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--dim", type=int, default=128)
    return p.parse_args(argv)
'''

HEADER = '''"""A synthetic mixed-precision training module (benchmarks/lsp_latency.py)."""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
'''

UPDATE = "            scaler.update()\n"


def training_file(lines: int, kind: str = "mixed") -> str:
    """``mixed``: a training script (models, data, metrics, argument parsing) whose AMP code
    is three trainers, ~15% of the lines; ``dense``: AMP trainers only (the worst case: no
    top-level definition can be skipped before parsing)."""
    parts, i, n = [HEADER], 0, HEADER.count("\n")
    trainers = 3 if kind == "mixed" else 10**9
    while n < lines:
        block = TRAINER if i < trainers else MODEL
        if kind == "mixed" and i >= trainers and n + block.count("\n") > lines:
            block = MODEL
        parts.append(block.format(i=i))
        n += parts[-1].count("\n")
        i += 1
    return "".join(parts)


async def measure(text: str, changes: int, debounce: float, path: str) -> dict:
    from lsprotocol import types
    from pygls import uris
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("lsp-latency", "1")
    published: dict[int, tuple[float, list]] = {}
    arrived = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(ls: LanguageClient, params: types.PublishDiagnosticsParams):
        published[params.version] = (time.perf_counter(), params.diagnostics)
        arrived.set()

    await client.start_io(sys.executable, "-m", "amplint", "server", "--debounce", str(debounce))
    root = os.path.dirname(path)
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=uris.from_fs_path(root), process_id=os.getpid()))
    client.initialized(types.InitializedParams())
    doc = uris.from_fs_path(path)

    async def wait(version: int):
        while version not in published:
            arrived.clear()
            await arrived.wait()
        return published[version]

    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=doc, language_id="python", version=0, text=text)))
    _, first = await asyncio.wait_for(wait(0), 120)
    assert list(first) == [], [d.code for d in first]
    line = text[: text.rindex(UPDATE)].count("\n")  # the last loop's scaler.update()
    latencies, version = [], 0
    for k in range(changes):
        version += 1
        drop = k % 2 == 0
        rng = types.Range(types.Position(line, 0), types.Position(line + 1, 0) if drop else types.Position(line, 0))
        t0 = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=doc, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text="" if drop else UPDATE)]))
        t1, diags = await asyncio.wait_for(wait(version), 120)
        codes = [d.code for d in diags]
        assert codes == (["AMP001"] if drop else []), codes  # the change was really analysed
        latencies.append(t1 - t0)
        await asyncio.sleep(0.05)  # a pause between keystrokes
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"median": statistics.median(latencies), "min": min(latencies), "max": max(latencies),
            "p90": sorted(latencies)[int(0.9 * (len(latencies) - 1))], "n": len(latencies)}


def engine_time(text: str, path: str, repeats: int = 20) -> float:
    from amplint.analyze import analyze_text

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        analyze_text(text, path)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--debounce", type=float, nargs="+", default=[0.0, 0.3])
    ap.add_argument("--kind", nargs="+", choices=["mixed", "dense"], default=["mixed", "dense"])
    args = ap.parse_args()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load}")
    print("| file | lines | analyze_text alone (ms) | debounce (s) | changes | median (ms) | p90 (ms) | min (ms) | max (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in args.kind:
        text = training_file(args.lines, kind)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "train.py")
            with open(path, "w") as fh:
                fh.write(text)
            engine = engine_time(text, path)
            for deb in args.debounce:
                r = asyncio.run(measure(text, args.changes, deb, path))
                print(f"| {kind} | {text.count(chr(10))} | {engine * 1e3:.1f} | {deb:g} | {r['n']} | {r['median'] * 1e3:.1f} | "
                      f"{r['p90'] * 1e3:.1f} | {r['min'] * 1e3:.1f} | {r['max'] * 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
