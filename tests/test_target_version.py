"""settings.target_torch_version reaches the rules: AMP101 reports a spelling only where the
target torch has its replacement (torch.amp.GradScaler and torch.amp.autocast: 2.3), and no
message or fix suggests `torch.amp.GradScaler("cuda", ...)` below 2.3."""

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


def test_fix_is_safe_where_the_replacement_exists_and_silent_before():
    assert _applicability("2.4") == ["safe", "safe"]
    assert _applicability("2.13") == ["safe", "safe"]
    # torch.amp.GradScaler and torch.amp.autocast both exist in 2.3
    assert _applicability("2.3") == ["safe", "safe"]
    # 2.2 has neither deprecation nor torch.amp.GradScaler: nothing to suggest
    assert _applicability("2.2") == []


def _messages(src, version):
    saved = engine.TARGET_TORCH_VERSION
    engine.configure(version)
    try:
        ds = analyze_text(src, "t.py").diagnostics
        return [(d.code, d.message, d.fix.message if d.fix else "") for d in ds]
    finally:
        engine.configure(saved)


def test_custom_fwd_needs_2_4():
    src = "import torch\n@torch.cuda.amp.custom_fwd\ndef f(x):\n    return x\n"
    assert [c for c, *_ in _messages(src, "2.3")] == []
    assert [c for c, *_ in _messages(src, "2.4")] == ["AMP101"]


def test_no_message_or_fix_suggests_torch_amp_grad_scaler_below_2_3():
    scaler_src = "import torch\nscaler = torch.cuda.amp.GradScaler()\nclass S(torch.cuda.amp.GradScaler):\n    pass\n"
    src = (
        "import torch\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    with torch.autocast('cuda', dtype=torch.float16):\n"
        "        loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    for version in ("2.0", "2.2"):
        assert _messages(scaler_src, version) == []
        out = _messages(src, version)
        assert any(c == "AMP201" and "torch.cuda.amp.GradScaler()" in m for c, m, _f in out)
        for _code, msg, fix in out:
            assert "torch.amp.GradScaler(" not in msg + fix, (msg, fix)
    assert any("torch.amp.GradScaler(" in m for _c, m, _f in _messages(src, "2.4"))
    assert len(_messages(scaler_src, "2.4")) == 2


def test_default_target_is_2_4():
    assert _applicability(None) == ["safe", "safe"]


def test_apex_message_names_the_scaler_the_target_has():
    src = "from apex import amp\nmodel, optimizer = amp.initialize(model, optimizer)\n"
    (old,) = [m for c, m, _f in _messages(src, "2.2") if c == "AMP104"]
    (new,) = [m for c, m, _f in _messages(src, "2.4") if c == "AMP104"]
    assert "torch.cuda.amp.GradScaler" in old and "torch.amp.GradScaler" not in old
    assert "torch.amp.GradScaler" in new
