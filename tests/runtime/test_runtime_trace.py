"""``amplint trace`` end to end (issue 16): the summary it always ends with, disabled scalers,
--fail-if-unchecked, and the processes a program starts (torchrun with 2 gloo CPU workers,
``python -m torch.distributed.run``, multiprocessing spawn and fork), merged with the rank."""

from __future__ import annotations

import json
import os
import sys

import pytest

torch = pytest.importorskip("torch")

from amplint.runtime import trace  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "user_scripts")
BIN = os.path.dirname(sys.executable)


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


def shown(path: str) -> str:
    """How trace prints a path: relative to the working directory when inside it."""
    return trace._display(path)


def line_of(path: str, tag: str) -> int:
    with open(path, encoding="utf-8") as fh:
        return next(i for i, text in enumerate(fh, 1) if f"# <{tag}>" in text)


@pytest.fixture
def venv_path(monkeypatch):
    """Launchers (torchrun) and `env python` resolve to this interpreter's environment."""
    monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the scaler is enabled where CUDA is available")
def test_disabled_cuda_scaler_on_cpu_says_nothing_was_checked(tmp_path, capfd):
    path = script("cuda_scaler_on_cpu.py")
    report = tmp_path / "trace.json"
    # without --fail-if-unchecked the status would be the program's (0): see _unchecked_reason's test
    assert trace.main(["--fail-if-unchecked", "--json", "-o", str(report), "--", "python", path]) == 1
    out, err = capfd.readouterr()
    assert out == "trained\n"
    assert (f"GradScaler torch.cuda.amp.GradScaler(device='cuda') created at {shown(path)}:9: DISABLED "
            f"(CUDA is not available); 0 iterations (scaler.update), 0 scaler.step, 3 scaler.scale "
            f"(not checked)") in err
    assert "autocast regions entered: 3 cuda float16 (disabled)" in err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("amplint trace: nothing was checked: the GradScaler is disabled: CUDA is not "
                           "available (a GradScaler for 'cuda', the default device, disables itself")
    assert last.endswith("(--fail-if-unchecked makes this exit 1)")
    # torch's warning points at the user's line, not at amplint's wrapper
    assert f"{path}:9: UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available" in err
    data = json.loads(report.read_text())
    assert data["checked"] is False and data["violations"] == [] and data["program_exit_status"] == 0
    assert data["unchecked_reason"].startswith("the GradScaler is disabled: CUDA is not available")


def test_torchrun_two_gloo_workers_are_traced_and_merged(venv_path, capfd):
    path = script("ddp_train.py")
    rc = trace.main(["--", "torchrun", "--standalone", "--nproc-per-node", "2", path])
    out, err = capfd.readouterr()
    assert rc == 1, err
    findings = [ln for ln in out.splitlines() if " AMP0" in ln]
    assert findings == [f"{shown(path)}:{line_of(path, 'clip')}: AMP006 gradient norm computed (clip_grad_norm_) on "
                        f"scaled gradients: they are still multiplied by the loss scale (scale 65536), so the "
                        f"norm is that many times too big and clipping over-clips; call "
                        f"scaler.unscale_(optimizer) first (x6; ranks 0, 1)"]
    assert "rank 0 done" in out and "rank 1 done" in out
    assert "amplint trace: 2 processes traced: rank 0 (pid " in err and ", rank 1 (pid " in err
    assert ("enabled; 6 iterations (scaler.update), 6 scaler.step, 6 scaler.scale [2 processes]") in err
    assert "findings: 1 AMP misuse (AMP006 x6)" in err


def test_python_m_torch_distributed_run(venv_path, capfd, monkeypatch):
    monkeypatch.setenv("STEPS", "1")
    path = script("ddp_train.py")
    rc = trace.main(["--", "python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                     path])
    out, err = capfd.readouterr()
    assert rc == 1, err
    assert f"{shown(path)}:{line_of(path, 'clip')}: AMP006 " in out and out.rstrip().endswith("(rank 0)")
    assert "amplint trace: 1 process traced: rank 0 (pid " in err


def test_multiprocessing_spawn_and_fork_children(capfd):
    path = script("mp_train.py")
    rc = trace.main(["--", "/usr/bin/env", "python", path] if os.path.exists("/usr/bin/env") and
                    os.path.realpath(os.path.join(BIN, "python")) == os.path.realpath(sys.executable)
                    and os.environ.get("PATH", "").startswith(BIN) else ["--", path])
    out, err = capfd.readouterr()
    assert rc == 1, err
    [finding] = [ln for ln in out.splitlines() if " AMP0" in ln]
    assert finding.startswith(f"{shown(path)}:{line_of(path, 'bypass')}: AMP004 optimizer.step() called directly")
    assert "(x4; pids " in finding  # 2 in the spawned child, 2 in the forked one
    assert "parent done, fork exit code 0" in out
    assert "amplint trace: 2 processes traced: pid " in err


def test_env_python_and_a_chained_sitecustomize(tmp_path, venv_path, capfd, monkeypatch):
    user = tmp_path / "userhook"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import sys\nprint('user sitecustomize ran', file=sys.stderr)\n")
    monkeypatch.setenv("PYTHONPATH", str(user))
    p = tmp_path / "clean.py"
    p.write_text(
        "import torch\n"
        "model = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "scaler = torch.amp.GradScaler('cpu')\n"
        "x, y = torch.randn(8, 4), torch.randn(8, 1)\n"
        "for _ in range(2):\n"
        "    opt.zero_grad()\n"
        "    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(opt)\n"
        "    scaler.update()\n"
    )
    assert trace.main(["--", "/usr/bin/env", "python", str(p)]) == 0
    out, err = capfd.readouterr()
    assert out == ""
    assert "user sitecustomize ran" in err  # the hook ran the sitecustomize it shadows
    assert "2 iterations (scaler.update), 2 scaler.step, 2 scaler.scale" in err
    assert err.rstrip().endswith("findings: none")


def test_accelerate_launch(venv_path, capfd):
    pytest.importorskip("accelerate")
    path = script("ddp_train.py")
    rc = trace.main(["--", "accelerate", "launch", "--cpu", "--num_processes", "2", path])
    out, err = capfd.readouterr()
    assert rc == 1, err
    assert "(x6; ranks 0, 1)" in out


def test_merge_and_unchecked_logic_on_synthetic_reports():
    def rep(pid, rank, scalers, violations=(), autocast=(), backward=0):
        return {"pid": pid, "rank": rank, "violations": list(violations),
                "stats": {"scalers": scalers, "autocast": list(autocast), "backward": backward,
                          "scaled_backward": 0, "optimizer_steps": 0}}

    sc = {"type": "torch.amp.GradScaler", "device": "cpu", "enabled": True, "reason": None,
          "created_at": "t.py:3", "scale": 2, "unscale_": 0, "step": 2, "update": 2}
    v = {"code": "AMP004", "message": "m", "path": "t.py", "line": 9, "count": 2}
    reports = [rep(11, 1, [sc], [v]), rep(10, 0, [sc], [v])]
    [m] = trace.merge_reports(reports)
    assert (m["count"], m["ranks"]) == (4, [0, 1])
    assert trace._unchecked_reason(reports) is None
    off = dict(sc, enabled=False, reason="enabled=False was passed")
    assert trace._unchecked_reason([rep(1, None, [off])]) == "the GradScaler is disabled: enabled=False was passed"
    bf16 = [{"device": "cpu", "dtype": "bfloat16", "enabled": True, "count": 3}]
    assert trace._unchecked_reason([rep(1, None, [], autocast=bf16, backward=3)]) is None  # a bf16 loop
    assert trace._unchecked_reason([]).startswith("no traced Python process used torch AMP")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_trace_on_cuda_reports_both_misuses_and_a_clean_run(capfd, monkeypatch):
    path = script("cuda_train.py")
    assert trace.main(["--", "python", path]) == 1
    out, err = capfd.readouterr()
    codes = sorted(ln.split()[1] for ln in out.splitlines() if " AMP0" in ln)
    assert codes == ["AMP004", "AMP006"], out
    assert "GradScaler torch.amp.GradScaler(device='cuda')" in err and ": enabled;" in err
    monkeypatch.setenv("CLEAN", "1")
    assert trace.main(["--fail-if-unchecked", "--", "python", path]) == 0
    out, err = capfd.readouterr()
    assert " AMP0" not in out and "20 iterations (scaler.update), 20 scaler.step" in err
    assert err.rstrip().endswith("findings: none")
