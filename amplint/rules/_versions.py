"""What the target torch version has (amp-facts: `torch.amp.GradScaler` and the CPU
GradScaler arrived in 2.3; before that only `torch.cuda.amp.GradScaler()`)."""

from __future__ import annotations

from amplint.settings import _parse_version


def at_least(model, need: str) -> bool:
    have = _parse_version(model.target_torch_version) or (0,)
    return have >= (_parse_version(need) or (0,))


def cuda_scaler_ctor(model, torch_name: str = "torch") -> str:
    """The constructor to suggest for a CUDA GradScaler in the target torch."""
    if at_least(model, "2.3"):
        return f'{torch_name}.amp.GradScaler("cuda")'
    return f"{torch_name}.cuda.amp.GradScaler()"


def scaler_class(model, torch_name: str = "torch") -> str:
    """How to name the native GradScaler class for the target torch."""
    return f"{torch_name}.amp.GradScaler" if at_least(model, "2.3") else f"{torch_name}.cuda.amp.GradScaler"
