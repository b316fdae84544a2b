"""Issue 12's new rules (AMP010, AMP011, AMP012, AMP302) and the widened existing ones,
through the real entry point: what they report, and the traps they stay silent on."""

from __future__ import annotations

import json
import textwrap

import pytest

from amplint_testutil import run_amplint

NEW = "AMP010,AMP011,AMP012,AMP302"


def check(tmp_path, src, select=NEW, *extra):
    p = tmp_path / "train.py"
    p.write_text(textwrap.dedent(src))
    r = run_amplint("check", "--no-cache", "--select", select, "--output-format", "json", *extra, str(p))
    assert r.returncode in (0, 1), r.stderr
    return [(d["code"], d["location"]["row"]) for d in json.loads(r.stdout)]


def test_rules_are_listed():
    r = run_amplint("rules")
    assert r.returncode == 0
    for code, name in (
        ("AMP010", "step-closure-with-scaler"),
        ("AMP011", "update-without-step"),
        ("AMP012", "jump-between-step-and-update"),
        ("AMP302", "scaler-state-discarded"),
    ):
        assert code in r.stdout and name in r.stdout


TRAPS = {
    # conditions the step and the update share, unscale_ first, AMP switches, accumulation
    "amp011": """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if scaler is not None:
                scaler.step(opt)
            if scaler is not None:
                scaler.update()
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if args.fp16:
                scaler.step(opt)
            else:
                opt.step()
            scaler.update()
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i % args.accumulate_grad_batches == 0:
                scaler.step(opt)
            scaler.update()
        for x in loader:
            scaler.scale(model(x)).backward()
            for opt in optimizers:
                scaler.step(opt)
            scaler.update()
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(opt)
            scaler.update()
            if scaler.get_scale() < 128:
                scaler.update(128.0)
    """,
    # a helper that updates before the jump, try/finally, loops nested in between
    "amp012": """
        import torch
        def t1(loader, scaler, opt):
            for x in loader:
                scaler.scale(x).backward()
                scaler.step(opt)
                if skip:
                    finish(scaler)
                    continue
                scaler.update()
        def t2(loader, scaler, opt):
            for x in loader:
                scaler.scale(x).backward()
                scaler.step(opt)
                while True:
                    if done():
                        break
                scaler.update()
        def t3(model, loader, opt):
            scaler = torch.amp.GradScaler("cuda")
            for epoch in range(3):
                for x in loader:
                    scaler.scale(model(x)).backward()
                    try:
                        scaler.step(opt)
                    except RuntimeError:
                        continue
                    finally:
                        scaler.update()
        def finish(s):
            s.update()
    """,
    # runs, lazy construction, evaluation helpers, disabled scalers, __init__
    "amp302": """
        import torch
        class Trainer:
            def __init__(self):
                self.scaler = torch.amp.GradScaler("cuda")
            def fit(self):
                for epoch in range(10):
                    self.train_epoch()
            def train_epoch(self):
                for x in self.loader:
                    self.scaler.scale(self.model(x)).backward()
                    self.scaler.step(self.opt)
                    self.scaler.update()
        for run in range(3):
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(optimizer)
                scaler.update()
        for epoch in range(3):
            scaler = torch.amp.GradScaler("cuda", enabled=False)
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(optimizer)
                scaler.update()
        def run_experiment(cfg):
            model = build(cfg)
            opt = make_optimizer(model)
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(opt)
                scaler.update()
        for cfg in grid:
            run_experiment(cfg)
        for i in range(n_steps):
            if i == 0:
                scaler = torch.amp.GradScaler("cuda")
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
    """,
    "amp010": """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
            ema.step(model)
            scheduler.step(metrics)
            lbfgs.step(lambda: fit_head(x))
    """,
}


@pytest.mark.parametrize("name", sorted(TRAPS))
def test_traps_stay_silent(tmp_path, name):
    assert check(tmp_path, TRAPS[name]) == []


def test_each_new_rule_reports_its_shape(tmp_path):
    src = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def closure():
            opt.zero_grad()
            scaler.scale(loss_fn(model(x), y)).backward()
            return loss
        for epoch in range(epochs):
            sc = torch.amp.GradScaler("cuda")
            for i, (x, y) in enumerate(loader):
                sc.scale(loss_fn(model(x), y)).backward()
                if i >= warmup:
                    sc.step(opt)
                sc.update()
        for i, (x, y) in enumerate(loader):
            scaler.step(opt, closure=closure)
            scaler.update()
        for i, (x, y) in enumerate(loader):
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(opt)
            if i % 10:
                continue
            scaler.update()
    """
    assert check(tmp_path, src) == [("AMP302", 9), ("AMP011", 14), ("AMP010", 16), ("AMP012", 22)]


def test_amp011_fix_is_applied_by_plain_fix(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(textwrap.dedent("""
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i >= warmup:
                scaler.step(opt)
                opt.zero_grad()
            log(i)
            scaler.update()
    """))
    r = run_amplint("fix", "--no-cache", "--select", "AMP011", str(p))
    assert r.returncode == 0, r.stdout + r.stderr
    assert p.read_text() == textwrap.dedent("""
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i >= warmup:
                scaler.step(opt)
                opt.zero_grad()
                scaler.update()
            log(i)
    """)


def test_amp011_no_fix_when_the_scaler_is_read_in_between(tmp_path):
    src = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i >= warmup:
                scaler.step(opt)
            print(scaler.get_scale())
            scaler.update()
    """
    p = tmp_path / "t.py"
    p.write_text(textwrap.dedent(src))
    r = run_amplint("check", "--no-cache", "--select", "AMP011", "--output-format", "json", str(p))
    (d,) = json.loads(r.stdout)
    assert d["fix"] is None


def test_widened_rules(tmp_path):
    src = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        model = Net().cuda().half()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        step_fn = lambda: optimizer.step()
        for x, y in loader:
            scaler.scale(loss_fn(model(x), y)).backward()
            for o in optimizers:
                o.step()
            step_fn()
        for x, y in loader:
            torch.autograd.backward(loss_fn(model(x), y))
            scaler.step(optimizer)
            scaler.update()
    """
    got = check(tmp_path, src, "AMP004,AMP005,AMP202")
    assert sorted(got) == [("AMP004", 6), ("AMP004", 10), ("AMP005", 13), ("AMP202", 4)]


def test_amp011_offers_no_fix_in_imprecise_shapes(tmp_path):
    src = """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i >= warmup: scaler.step(opt)
            scaler.update()
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i >= warmup:
                scaler.step(opt); opt.zero_grad()
            scaler.update(); print(i)
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if i >= warmup:
                scaler.step(opt)
            scaler.update()  # keep this comment
    """
    p = tmp_path / "t.py"
    p.write_text(textwrap.dedent(src))
    r = run_amplint("check", "--no-cache", "--select", "AMP011", "--output-format", "json", str(p))
    found = json.loads(r.stdout)
    assert [d["location"]["row"] for d in found] == [7, 12, 17]
    assert all(d["fix"] is None for d in found)
