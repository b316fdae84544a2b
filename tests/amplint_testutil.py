"""Helpers shared by the test modules (a unique name: tests/runtime has its own conftest)."""
import os
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "fixtures")


def run_amplint(*args, cwd=None, input=None, env=None):
    """Run the real entry point (`python -m amplint`) and return the CompletedProcess."""
    e = dict(os.environ)
    e.pop("AMPLINT_OUTPUT_FORMAT", None)
    e.pop("AMPLINT_CACHE_DIR", None)
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "amplint", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=input is None or isinstance(input, str),
        env=e,
        timeout=120,
    )


# --------------------------------------------------------------------------- screen variants
import re as _re

# Each byte string amplint.screen looks for, and a same-length spelling that it does not
# match. Renaming keeps the code parseable (identifiers stay identifiers).
SCREEN_TOKENS = {
    "GradScaler": lambda s: s.replace("GradScaler", "GradScalxr"),
    "cuda.amp": lambda s: s.replace("cuda.amp", "cuda.axp"),
    "cpu.amp": lambda s: s.replace("cpu.amp", "cpu.axp"),
    "import amp": lambda s: s.replace("import amp", "import axp"),
    "apex": lambda s: s.replace("apex", "apxx"),
    "autocast": lambda s: s.replace("autocast", "autocaxt"),
    "torch.amp": lambda s: s.replace("torch.amp", "torch.axp"),
    # any case, except inside `GradScaler` (its own token)
    "scaler": lambda s: _re.sub(r"(?i)(?<!Grad)scaler", lambda m: m.group(0)[:4] + "x" + m.group(0)[5:], s),
    "backward": lambda s: s.replace("backward", "backxard"),
    # the framework clauses (AMP4xx): an fp16 setting next to accelerate/HF/DeepSpeed, Lightning and 16
    "fp16": lambda s: s.replace("fp16", "fx16"),
    "lightning": lambda s: _re.sub(r"(?i)lightning", lambda m: m.group(0)[:4] + "x" + m.group(0)[5:], s),
}


def screen_variants(src: str) -> list[tuple[str, str]]:
    """(label, source) variants of ``src`` in which every screen token but at most two is
    renamed (all of them in the first): the inputs on which the screen's rejections can be
    wrong. Variants equal to ``src`` are left out."""
    from itertools import combinations

    names = list(SCREEN_TOKENS)
    out = []
    for k in (0, 1, 2):
        for keep in combinations(names, k):
            text = src
            for tok in names:
                if tok not in keep:
                    text = SCREEN_TOKENS[tok](text)
            if text != src:
                out.append(("only " + "+".join(keep) if keep else "none", text))
    return out
