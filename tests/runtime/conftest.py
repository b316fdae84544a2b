"""Shared fixtures for the runtime tests (torch needed; every module importorskips it)."""

from __future__ import annotations

import importlib.util
import inspect
import os

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="session", autouse=True)
def _warm_torch():
    """Pay the torch import and the first-optimizer (torch._dynamo import) cost once."""
    if not HAS_TORCH:
        yield None
        return
    import torch

    from amplint.runtime import harness

    with harness.cpu_threads("cpu"):
        harness.fp32_baseline(0, "cpu")
    yield torch


def line_of(obj_or_path, tag: str) -> int:
    """Line number of the line carrying the comment ``# <tag>`` in a module/file."""
    path = obj_or_path if isinstance(obj_or_path, (str, os.PathLike)) else inspect.getsourcefile(obj_or_path)
    with open(path, encoding="utf-8") as fh:
        for i, text in enumerate(fh, 1):
            if f"# <{tag}>" in text:
                return i
    raise LookupError(f"no '# <{tag}>' in {path}")
