"""settings.target_torch_version reaches the rules: AMP101's fix is safe only for torch >= 2.4."""

from __future__ import annotations

from amplint import analyze as engine
from amplint.analyze import analyze_text

SRC = "import torch\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"


def _applicability(version):
    saved = engine.TARGET_TORCH_VERSION
    engine.configure(version)
    try:
        return sorted(d.fix.applicability for d in analyze_text(SRC, "t.py").diagnostics if d.code == "AMP101")
    finally:
        engine.configure(saved)


def test_fix_is_safe_from_2_4_and_display_only_before():
    assert _applicability("2.4") == ["safe", "safe"]
    assert _applicability("2.13") == ["safe", "safe"]
    # torch.amp.GradScaler exists from 2.3, autocast's FutureWarning/custom_fwd(device_type) from 2.4
    assert _applicability("2.3") == ["display-only", "safe"]
    assert _applicability("2.2") == ["display-only", "display-only"]


def test_default_target_is_2_4():
    assert _applicability(None) == ["safe", "safe"]
