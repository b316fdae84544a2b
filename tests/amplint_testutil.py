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
