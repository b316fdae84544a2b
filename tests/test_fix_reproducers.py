"""Issue 11: the minimal reproducers of safe fixes that broke code, each pinned to what the
fixer does now (statement-precise edits, no fix where a fix cannot be proved safe). The
execution oracle in tests/fixsafety/ runs such loops before and after fixing."""

from __future__ import annotations

import re
import textwrap

import pytest

from amplint.analyze import analyze_text
from amplint.fix.apply import fix_text
from amplint_testutil import run_amplint


def _fix(src: str, unsafe: bool = False) -> tuple[str, int, bool]:
    src = textwrap.dedent(src).lstrip("\n")

    def want(d, lines):
        return d.fix is not None and (d.fix.applicability == "safe" or (unsafe and d.fix.applicability == "unsafe"))

    return fix_text(src, "t.py", want)


def _codes(src: str) -> list[str]:
    return [d.code for d in analyze_text(textwrap.dedent(src).lstrip("\n"), "t.py").diagnostics]


def _fixable(src: str) -> list[str]:
    return [d.code for d in analyze_text(textwrap.dedent(src).lstrip("\n"), "t.py").diagnostics if d.fix is not None]


HEAD = """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    with torch.autocast("cuda"):
        loss = model(x)
"""


# 1. statements on a semicolon line: only the one small statement is edited
def test_amp007_semicolon_line_keeps_the_step():
    new, n, ok = _fix(HEAD + "    scaler.scale(loss).backward()\n    scaler.step(opt_a); scaler.update(); scaler.update()\n")
    assert new.endswith("    scaler.step(opt_a); scaler.update()\n")
    assert (n, ok) == (1, True)


def test_amp006_unscale_goes_between_backward_and_clip_on_one_line():
    new, n, _ = _fix(HEAD + "    scaler.scale(loss).backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                     "    scaler.step(opt)\n    scaler.update()\n")
    assert "    scaler.scale(loss).backward(); scaler.unscale_(opt); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n" in new
    assert n == 1


def test_amp101_semicolon_import_keeps_import_torch():
    new, n, _ = _fix("import torch; from torch.cuda.amp import GradScaler\nscaler = GradScaler()\n")
    assert new == 'import torch; from torch.amp import GradScaler\nscaler = GradScaler("cuda")\n'
    assert n == 1


def test_unsafe_amp009_on_a_semicolon_line_keeps_the_backward():
    new, _, _ = _fix(HEAD + "    scaler.scale(loss).backward(); opt.zero_grad()\n    scaler.step(opt)\n    scaler.update()\n", unsafe=True)
    assert "    scaler.scale(loss).backward()\n    scaler.step(opt)\n    scaler.update()\n    opt.zero_grad()\n" in new


def test_unsafe_amp003_on_a_semicolon_line_deletes_only_the_second_scaler():
    src = """
    import torch
    from torch.amp import GradScaler
    d = "cuda"
    s1 = GradScaler(d); s2 = GradScaler(d)
    for x in loader:
        with torch.autocast(d):
            l1, l2 = model(x)
        s1.scale(l1).backward()
        s2.scale(l2).backward()
        s1.step(opt)
        s2.step(opt)
        s1.update()
        s2.update()
    """
    new, _, _ = _fix(src, unsafe=True)
    assert "s1 = GradScaler(d)\n" in new and "s2" not in new


# 2. a scaler that may be None: the step takes the branch the backward took
def test_amp004_none_scaler_gets_the_matching_guard():
    src = """
    import torch
    from torch.amp import GradScaler
    def train(model, loader, optimizer, use_amp):
        scaler = GradScaler("cuda") if use_amp else None
        for x in loader:
            with torch.autocast("cuda", enabled=use_amp):
                loss = model(x)
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            optimizer.step()  # the step
    """
    new, n, _ = _fix(src)
    assert new.endswith(
        "        if scaler is not None:\n"
        "            scaler.step(optimizer)\n"
        "            scaler.update()\n"
        "        else:\n"
        "            optimizer.step()  # the step\n"
    )
    assert n == 1


# 3. clip on every micro-batch, step under the accumulation guard: no per-micro-batch unscale_
def test_amp006_no_fix_when_the_step_is_under_a_guard_the_clip_lacks():
    src = """
    import torch
    def train(model, loader, optimizer, scaler: torch.amp.GradScaler, accum):
        for i, x in enumerate(loader):
            with torch.autocast("cuda"):
                loss = model(x) / accum
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """
    assert _codes(src) == ["AMP006"]
    assert _fixable(src) == []


# 4. `return self.scaler.step(...)`: never an update after the return
def test_amp001_no_update_inserted_after_a_return():
    src = """
    import torch
    class Trainer:
        def __init__(self, optimizer):
            self.scaler = torch.amp.GradScaler("cuda")
            self.optimizer = optimizer
        def optimizer_step(self):
            return self.scaler.step(self.optimizer)
    """
    new, n, ok = _fix(src)
    assert (n, ok) == (0, True)
    assert new == textwrap.dedent(src).lstrip("\n")


# 5. an alias of the deprecated class keeps working (torch.amp.GradScaler takes the device first)
def test_amp101_alias_of_the_class_is_not_rewritten():
    src = """
    import torch
    GS = torch.cuda.amp.GradScaler
    scaler = GS(4096.0, enabled=True)
    ok = isinstance(scaler, torch.cuda.amp.GradScaler)
    """
    new, _, _ = _fix(src)
    assert "GS = torch.cuda.amp.GradScaler\n" in new
    assert "isinstance(scaler, torch.cuda.amp.GradScaler)" in new  # torch.amp's also matches CPU scalers


# 6. the backward statement also runs the forward: not movable out of autocast
def test_amp002_no_fix_when_the_backward_statement_computes_the_forward():
    src = """
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for xb, yb in loader:
        opt.zero_grad()
        with torch.autocast("cuda"):
            out = model(xb)
            scaler.scale(loss_fn(model(xb), yb) / 2).backward()
            scaler.step(opt)
            scaler.update()
    """
    assert _codes(src) == ["AMP002"]
    assert _fixable(src) == []


# 7. false positives that came with a wrong fix
def test_amp006_silent_for_a_norm_unscaled_by_hand():
    src = HEAD + (
        "    scaler.scale(loss).backward()\n"
        "    norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]) / scaler.get_scale()\n"
        "    scaler.step(opt)\n    scaler.update()\n"
    )
    assert "AMP006" not in _codes(src)


def test_own_class_named_gradscaler_without_torch_is_not_a_torch_scaler():
    src = """
    class GradScaler:
        def scale(self, loss):
            return loss
        def step(self, optimizer):
            optimizer.step()
    def train(model, loader, optimizer):
        scaler = GradScaler()
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
    """
    assert _codes(src) == []


def test_amp002_silent_inside_an_explicitly_disabled_inner_region():
    src = """
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.autocast("cuda"):
            loss = model(x)
            with torch.autocast("cuda", enabled=False):
                scaler.scale(loss.float()).backward()
        scaler.step(opt)
        scaler.update()
    """
    assert "AMP002" not in _codes(src)


# 8. comments survive
def test_amp004_keeps_a_comment_inside_the_call():
    src = HEAD + "    scaler.scale(loss).backward()\n    optimizer.step(\n        # TODO: closure?\n    )\n    scaler.update()\n"
    new, n, _ = _fix(src)
    assert "# TODO: closure?" in new and "scaler.step(" in new and "optimizer.step(" not in new
    assert n == 1
    compile(new, "t.py", "exec")


def test_amp101_keeps_parentheses_and_comments_of_a_from_import():
    src = """
    from torch.cuda.amp import (  # the AMP API
        GradScaler,  # scaler
        autocast,
    )
    scaler = GradScaler()
    """
    new, _, _ = _fix(src)
    assert new.startswith("from torch.amp import (  # the AMP API\n    GradScaler,  # scaler\n    autocast,\n)\n")


# 9. a [*] finding is fixed, and check, --diff and fix count the same
COUNTS = """\
import torch; from torch.cuda.amp import GradScaler


def train(model, loader, opt, opt_b, use_amp):
    scaler = GradScaler()
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = model(x)
        scaler.scale(loss).backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if use_amp: scaler.step(opt); opt.zero_grad()
        scaler.step(opt_b); scaler.update(); scaler.update()
"""

SUITE = """\
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    with torch.autocast("cuda"):
        loss = model(x)
    scaler.scale(loss).backward()
    if ready: scaler.step(o); o.zero_grad()
"""


@pytest.mark.parametrize("src", [COUNTS, SUITE], ids=["semicolons", "one-line-suite"])
def test_check_diff_and_fix_agree_on_the_count(tmp_path, src):
    f = tmp_path / "t.py"
    f.write_text(src)
    check = run_amplint("check", "--no-cache", "t.py", cwd=tmp_path)
    n = int(re.search(r"\[\*\] (\d+) fixable", check.stdout).group(1))
    diff = run_amplint("check", "--diff", "--no-cache", "t.py", cwd=tmp_path)
    assert f"Would fix {n} error" in diff.stderr
    fix = run_amplint("fix", "--no-cache", "t.py", cwd=tmp_path)
    assert f"({n} fixed," in fix.stdout
    again = run_amplint("check", "--no-cache", "t.py", cwd=tmp_path)
    assert "fixable" not in again.stdout


def test_one_line_suite_fix_is_applied():
    new, n, ok = _fix(SUITE)
    assert new.endswith("    if ready: scaler.step(o); scaler.update(); o.zero_grad()\n")
    assert (n, ok) == (1, True)
