#!/usr/bin/env python3
"""Compare the findings of two amplint builds over a corpus of repositories (the safety net for
moving a rule onto another implementation).

    python benchmarks/diffrule.py BASE_TREE NEW_TREE CORPUS_DIR [--select CODES] [--jobs N] [--out FILE]

BASE_TREE and NEW_TREE are source trees holding an ``amplint/`` package (e.g. ``git worktree add
/tmp/base <rev>`` and this checkout). Each repository folder under CORPUS_DIR (or each folder
listed, one per line, in CORPUS_DIR when it is a file) is checked by both builds with
``check --preview --no-cache --exit-zero --output-format json .`` (every rule unless --select),
and every finding (path, row, code) that only one build reports is printed as ``+`` (new build
only) or ``-`` (base only) with its message, then the totals.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def findings(tree: str, repo: str, select: str | None) -> dict:
    cmd = [sys.executable, "-m", "amplint", "check", "--preview", "--no-cache", "--exit-zero", "--output-format", "json", "."]
    if select:
        cmd[4:4] = ["--select", select]
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {("<error>", 0, f"rc={p.returncode}"): p.stderr[-300:]}
    out = {}
    for d in json.loads(p.stdout or "[]"):
        out[(os.path.relpath(os.path.join(repo, d["filename"]), repo), d["location"]["row"], d["code"])] = d["message"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("corpus")
    ap.add_argument("--select")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args()
    if os.path.isfile(a.corpus):
        repos = [ln.strip() for ln in open(a.corpus, encoding="utf-8") if ln.strip()]
    else:
        repos = sorted(os.path.join(a.corpus, d) for d in os.listdir(a.corpus) if os.path.isdir(os.path.join(a.corpus, d)))

    def one(repo):
        return repo, findings(a.base, repo, a.select), findings(a.new, repo, a.select)

    lines, plus, minus, total_base, total_new = [], 0, 0, 0, 0
    with ThreadPoolExecutor(a.jobs) as ex:
        for repo, old, new in ex.map(one, repos):
            total_base += len(old)
            total_new += len(new)
            name = os.path.basename(repo)
            for k in sorted(set(new) - set(old)):
                plus += 1
                lines.append(f"+ {name} {k[0]}:{k[1]} {k[2]} {new[k][:160]}")
            for k in sorted(set(old) - set(new)):
                minus += 1
                lines.append(f"- {name} {k[0]}:{k[1]} {k[2]} {old[k][:160]}")
    lines.append(f"{len(repos)} repositories: base {total_base} findings, new {total_new}; +{plus} -{minus}")
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
