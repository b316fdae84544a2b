"""Resource bounds on a big, hostile repository: peak memory and wall time of `amplint check`.

    .venv/bin/python benchmarks/hostile_tree.py --files 10000 --out benchmarks/out/hostile
    .venv/bin/python benchmarks/hostile_tree.py --files 10000 --out benchmarks/out/hostile --format json --jobs 2

Builds (once; reused when present) a tree of FILES .py files: ~70% plain model/data code the
pre-screen skips, ~25% AMP training loops (a third of them misusing the scaler), ~5% hostile
(syntax errors, Python 2, undecodable bytes, null bytes, 3,000-line generated files, a 200 KB
line, deep nesting, broken symlinks, a symlink loop, a FIFO). Then runs `python -m amplint check`
on it and reports the exit code, the number of entries, the wall time, the peak RSS of the
largest amplint process (resource.getrusage(RUSAGE_CHILDREN).ru_maxrss, the main process or
one pool worker) and the peak summed RSS of the whole process tree (sampled from /proc every
20 ms; Linux only). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

LOOP = """import torch

scaler = torch.amp.GradScaler("cuda")


def train_{i}(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
{update}"""

PLAIN = """import torch.nn as nn


class Block{i}(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return self.lin(x).relu() + {i}
"""

HOSTILE = [
    lambda i: b'print "scaler %d"\nGradScaler = 1\n' % i,
    lambda i: b'GradScaler = "unterminated\n',
    lambda i: b'GradScaler = "caf\xe9"\n',
    lambda i: b"GradScaler = 1\x00\n",
    lambda i: (LOOP.format(i=i, update="") + "".join(f"x{j} = {j}\n" for j in range(3000))).encode(),
    lambda i: b'scaler = torch.amp.GradScaler("cuda")\ns = "' + b"x" * 200_000 + b'"\n',
    lambda i: b"GradScaler = " + b"(" * 300 + b"1" + b")" * 300 + b"\n",
    lambda i: b"GradScaler = " + b"+".join([b"a"] * 3000) + b"\n",
    lambda i: b"\xef\xbb\xbf" + LOOP.format(i=i, update="").replace("\n", "\r\n").encode(),
]


def build(out: str, files: int, seed: int = 0) -> None:
    marker = os.path.join(out, ".built")
    if os.path.exists(marker) and open(marker).read() == f"{files} {seed}":
        return
    rng = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    for i in range(files):
        d = os.path.join(out, f"pkg{i % 100:02d}", f"sub{i % 7}")
        os.makedirs(d, exist_ok=True)
        r = rng.random()
        if r < 0.70:
            data = PLAIN.format(i=i).encode()
        elif r < 0.95:
            data = LOOP.format(i=i, update="" if rng.random() < 0.33 else "        scaler.update()\n").encode()
        else:
            data = HOSTILE[i % len(HOSTILE)](i)
        with open(os.path.join(d, f"m{i}.py"), "wb") as fh:
            fh.write(data)
    extras = os.path.join(out, "pkg00")
    for name, make in [
        ("broken_link.py", lambda p: os.symlink("nowhere.py", p)),
        ("loop", lambda p: os.symlink("..", p)),
        ("fifo.py", lambda p: os.mkfifo(p) if hasattr(os, "mkfifo") else None),
    ]:
        p = os.path.join(extras, name)
        if not os.path.lexists(p):
            make(p)
    with open(marker, "w") as fh:
        fh.write(f"{files} {seed}")


def _tree_rss_kb(root_pid: int) -> int:
    """Summed RSS of root_pid and its descendants (Linux /proc)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            parent[int(name)] = int(fields[1])
            rss[int(name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [root_pid]
    children: dict[int, list[int]] = {}
    for pid, pp in parent.items():
        children.setdefault(pp, []).append(pid)
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def measure(out: str, fmt: str, jobs: int | None) -> dict:
    cmd = [sys.executable, "-m", "amplint", "check", out, "--no-cache", "--output-format", fmt]
    if jobs:
        cmd += ["-j", str(jobs)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_tree = 0
    sampling = os.path.isdir("/proc")
    import threading

    chunks: dict[str, bytes] = {}

    def drain(name, stream):
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s)) for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    while proc.poll() is None:
        if sampling:
            peak_tree = max(peak_tree, _tree_rss_kb(proc.pid))
        time.sleep(0.02)
    for r in readers:
        r.join()
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    out_text = chunks.get("out", b"").decode("utf-8", "replace")
    if fmt == "json":
        entries = len(json.loads(out_text or "[]"))
    else:
        entries = sum(1 for line in out_text.splitlines() if ": " in line and line.split(":", 3)[1:2] and line.split(":", 3)[1].isdigit())
    err = chunks.get("err", b"").decode("utf-8", "replace")
    return {
        "files": sum(1 for _, _, fs in os.walk(out) for f in fs if f.endswith(".py")),
        "format": fmt,
        "exit_code": proc.returncode,
        "entries": entries,
        "wall_s": round(wall, 2),
        "peak_rss_largest_process_mb": round(ru.ru_maxrss / 1024, 1),  # ru_maxrss: KB on Linux
        "peak_rss_process_tree_mb": round(peak_tree / 1024, 1) if sampling else None,
        "crashed": "Traceback" in err or "crashed" in err,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "hostile"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", default="concise", choices=["concise", "json", "full"])
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args(argv)
    t = time.perf_counter()
    build(args.out, args.files, args.seed)
    print(f"tree: {args.out} ({args.files} files, built/reused in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
    res = measure(args.out, args.format, args.jobs)
    print(json.dumps(res, indent=2))
    return 0 if res["exit_code"] in (0, 1) and not res["crashed"] else 1


if __name__ == "__main__":
    sys.exit(main())
