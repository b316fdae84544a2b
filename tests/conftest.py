import os
import subprocess
import sys

import pytest

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


@pytest.fixture
def amplint():
    return run_amplint
