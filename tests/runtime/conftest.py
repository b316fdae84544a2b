"""Shared fixtures for the runtime tests (torch needed; every module importorskips it)."""

from __future__ import annotations

import importlib.util

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
