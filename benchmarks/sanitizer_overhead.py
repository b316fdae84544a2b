"""Overhead of the runtime sanitizer (`amplint.runtime.sanitize`) on the reference AMP loop.

Runs the canonical loop on the harness problem (CPU, 1 thread, 8-32-1 MLP) plain and under
the sanitizer, alternating, and prints the median of several rounds. Needs torch:

    python benchmarks/sanitizer_overhead.py [--rounds 7] [--steps 200] [--dtype float16]
"""

from __future__ import annotations

import argparse
import statistics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = ap.parse_args()
    from amplint.runtime.sanitizer import measure_overhead

    plain, traced, ratios = [], [], []
    for _ in range(args.rounds):
        r = measure_overhead(args.steps, dtype=args.dtype, repeats=1)
        plain.append(r["plain_s"])
        traced.append(r["traced_s"])
        ratios.append(r["ratio"])
    print(f"| loop | steps | dtype | plain median (ms) | traced median (ms) | overhead (median ratio - 1) | ratio min-max |")
    print("|---|---:|---|---:|---:|---:|---|")
    print(
        f"| reference | {args.steps} | {args.dtype} | {statistics.median(plain) * 1e3:.1f} | "
        f"{statistics.median(traced) * 1e3:.1f} | {100 * (statistics.median(ratios) - 1):+.1f}% | "
        f"{min(ratios):.2f}-{max(ratios):.2f} |"
    )


if __name__ == "__main__":
    main()
