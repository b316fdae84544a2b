"""trace (the module's main, command resolution, usage errors), verify (table, exit codes), and
the click commands (options, help texts, exit codes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
click_testing = pytest.importorskip("click.testing")

from amplint.runtime import trace, verify  # noqa: E402
from amplint.runtime.commands import trace_command, verify_command  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""\
    import sys
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    steps = int(sys.argv[1])
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        {STEP}
    print("done", sys.argv[1:])
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
""")


def _script(tmp_path, step_line, name="train.py"):
    p = tmp_path / name
    p.write_text(SCRIPT.replace("{STEP}", step_line))
    return p


def test_trace_reports_violation_with_interpreter_options_and_json(tmp_path, capfd):
    p = _script(tmp_path, "opt.step()")
    # python -u -X dev -W ...: interpreter options pass through; --json keeps stdout for amplint
    rc = trace.main(["--json", "--", "python", "-u", "-X", "dev", "-W", "ignore::UserWarning", str(p), "2"])
    out, err = capfd.readouterr()
    data = json.loads(out)  # the script's own print went to stderr
    assert rc == 1 and "done ['2']" in err
    assert [(v["code"], v["line"], v["count"]) for v in data["violations"]] == [("AMP004", 16, 2)]
    assert data["checked"] is True and data["exit_status"] == 1 and data["program_exit_status"] == 0
    [proc] = data["processes"]
    assert proc["stats"]["scalers"][0]["device"] == "cpu" and proc["stats"]["scalers"][0]["enabled"]
    assert "amplint trace: 1 process traced" in err and "findings: 1 AMP misuse (AMP004 x2)" in err


def test_trace_clean_run_keeps_exit_status_and_always_summarises(tmp_path, capfd):
    p = _script(tmp_path, "scaler.step(opt); scaler.update()")
    assert trace.main(["--", str(p), "2", "3"]) == 3  # the script's own status
    out, err = capfd.readouterr()
    assert out == "done ['2', '3']\n"  # nothing from amplint on stdout
    assert "AMP0" not in err
    assert f"GradScaler torch.amp.GradScaler(device='cpu') created at {p}:8: enabled; " \
           f"2 iterations (scaler.update), 2 scaler.step, 2 scaler.scale" in err
    assert "autocast regions entered: 2 cpu bfloat16" in err
    assert "backward calls: 2 (2 scaled); optimizer steps: 2" in err
    assert err.rstrip().endswith("findings: none")


def test_trace_script_exception_is_the_programs_status(tmp_path, capfd):
    p = tmp_path / "boom.py"
    p.write_text("raise ValueError('boom')\n")
    assert trace.main(["--", str(p)]) == 1
    err = capfd.readouterr().err
    assert "ValueError: boom" in err
    assert "nothing was checked: no traced Python process used torch AMP" in err


def test_trace_usage_errors(tmp_path, capsys):
    assert trace.main([]) == 2
    assert "no command given" in capsys.readouterr().err
    assert trace.main(["--", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip() == f"amplint trace: no such file: {tmp_path / 'missing.py'}"
    assert trace.main(["--", "amplint-no-such-launcher", "x.py"]) == 2
    assert "command not found: amplint-no-such-launcher" in capsys.readouterr().err
    p = _script(tmp_path, "pass")
    assert trace.main(["--", "python", "-I", str(p)]) == 2
    assert "-I (isolated mode) ignores PYTHONPATH" in capsys.readouterr().err
    assert trace.main(["--bogus", "--", str(p)]) == 2
    assert trace.split_command(["--", "python", "-m", "pkg.mod", "a"]) == ("module", "pkg.mod", ["a"])
    assert trace.split_command(["python", "-u", "-X", "dev", "t.py", "a"]) == ("path", "t.py", ["a"])
    assert trace.split_command(["/usr/bin/env", "python3", "-W", "error", "t.py"]) == ("path", "t.py", [])


def test_resolve_command(tmp_path, monkeypatch):
    p = _script(tmp_path, "pass")
    assert trace.resolve_command(["--", str(p), "1"]) == [sys.executable, str(p), "1"]
    assert trace.resolve_command(["python", "-u", str(p)]) == [sys.executable, "-u", str(p)]
    assert trace.resolve_command(["python3", "-m", "pkg"]) == [sys.executable, "-m", "pkg"]
    assert trace.resolve_command(["/usr/bin/env", "python", str(p)]) == ["/usr/bin/env", "python", str(p)]
    # a launcher on PATH, and one next to this interpreter (a venv that is not activated)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    launcher = bindir / "mylauncher"
    launcher.write_text("#!/bin/sh\nexit 0\n")
    launcher.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    assert trace.resolve_command(["mylauncher", str(p)]) == [str(launcher), str(p)]
    if os.path.exists(os.path.join(os.path.dirname(sys.executable), "torchrun")):
        monkeypatch.setenv("PATH", str(bindir))
        assert trace.resolve_command(["torchrun", str(p)])[0] == os.path.join(
            os.path.dirname(sys.executable), "torchrun")


def test_trace_output_file_that_cannot_be_written(tmp_path, capsys):
    p = _script(tmp_path, "opt.step()")
    assert trace.main(["-o", str(tmp_path / "no" / "dir.txt"), "--", str(p), "1"]) == 2
    assert "amplint trace: cannot write" in capsys.readouterr().err


def test_trace_as_module_subprocess(tmp_path):
    p = _script(tmp_path, "opt.step()")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "amplint.runtime.trace", "--", str(p), "1"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, r.stderr
    assert f"{p}:16: AMP004" in r.stdout and "amplint trace: 1 process traced" in r.stderr


GOOD = textwrap.dedent("""\
    import torch

    def train_step(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.item()
""")

BAD = textwrap.dedent("""\
    import torch

    def train_loop(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
        losses = []
        for x, y in batches:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
        return losses
""")


def test_verify_rows_table_and_exit_codes(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(GOOD)
    bad.write_text(BAD)
    rows, code = verify.verify([good], device="cpu")
    assert code == 0 and [os.path.basename(r.loop) for r in rows] == ["reference", "good.py:train_step"]
    assert rows[1].reference[0] is True
    rows, code = verify.verify([good, bad], device="cpu", dtype="bfloat16")
    assert code == 1
    table = verify.format_table(rows)
    lines = table.splitlines()
    # first how each function was called, then the table
    assert lines[0].endswith("good.py:train_step (called once per harness batch)")
    assert "  batch       <- one harness batch (x, y) per call" in lines
    at = next(i for i, line in enumerate(lines) if line.startswith("loop "))
    header = lines[at].split()
    assert header[:3] == ["loop", "device", "dtype"] and "4_growth" in header
    bad_line = next(line for line in lines[at:] if line.split() and line.split()[0].endswith("bad.py:train_loop"))
    assert "FAIL rel=" in bad_line and "AMP006" in bad_line and "bfloat16" in bad_line
    assert f"{bad}:10: AMP006" in table
    assert "bad.py:train_loop: 2_loss_vs_fp32: amp=" in table and "first divergence at optimizer step 0" in table
    data = json.loads(json.dumps([r.as_dict() for r in rows]))
    assert data[1]["mapping"][1] == {"where": "param", "name": "batch", "role": "batch", "source": "role",
                                     "value": "one harness batch (x, y) per call"}


def test_verify_file_without_loops_or_broken(tmp_path):
    empty, broken = tmp_path / "empty.py", tmp_path / "broken.py"
    empty.write_text("x = 1\n")
    broken.write_text("import does_not_exist_amplint\n")
    rows, code = verify.verify([empty, broken], device="cpu")
    assert code == 1
    assert rows[1].error.startswith("no training function found")
    assert rows[2].error == ("import failed: line 1 (import does_not_exist_amplint) raised "
                             "ModuleNotFoundError: No module named 'does_not_exist_amplint'")


def test_verify_device_and_plot_errors(tmp_path):
    if not torch.cuda.is_available():
        with pytest.raises(verify.DeviceUnavailable):
            verify.verify([], device="cuda")
        assert issubclass(verify.DeviceUnavailable, RuntimeError)
    with pytest.raises(verify.PlotUnavailable, match=r"unknown image format '\.xyz'"):
        verify.verify([], device="cpu", plot=str(tmp_path / "out.xyz"))
    with pytest.raises(verify.PlotUnavailable, match="does not exist"):
        verify.verify([], device="cpu", plot=str(tmp_path / "missing" / "out.png"))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(verify.PlotUnavailable, match="pip install matplotlib"):
            verify.verify([], device="cpu", plot=str(tmp_path / "out.png"))
    else:
        rows, code = verify.verify([], device="cpu", plot=str(tmp_path / "out.png"))
        assert code == 0 and (tmp_path / "out.png").stat().st_size > 0


def test_click_verify_command(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(GOOD)
    runner = click_testing.CliRunner()
    r = runner.invoke(verify_command, [str(good), "--device", "cpu", "--dtype", "bfloat16"])
    assert r.exit_code == 0, r.output
    assert "good.py:train_step" in r.stdout and "bfloat16" in r.stdout
    if not torch.cuda.is_available():
        r = runner.invoke(verify_command, ["--device", "cuda"])
        assert r.exit_code == 2 and "CUDA is not available" in r.output


@pytest.mark.parametrize("plot, message", [
    ("missing/out.png", "does not exist"),
    ("out.xyz", "unknown image format '.xyz'"),
    ("out.png", "pip install matplotlib"),
])
def test_click_verify_plot_errors_are_one_line_usage_errors(tmp_path, plot, message):
    if plot == "out.png":
        pytest.importorskip("torch")
        try:
            import matplotlib  # noqa: F401
            pytest.skip("matplotlib is installed")
        except ImportError:
            pass
    good = tmp_path / "good.py"
    good.write_text(GOOD)
    r = click_testing.CliRunner().invoke(verify_command, [str(good), "--device", "cpu",
                                                          "--plot", str(tmp_path / plot)])
    assert r.exit_code == 2
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and message in r.stderr, r.stderr


def test_click_verify_output_file_and_bad_arg(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(GOOD)
    out = tmp_path / "table.txt"
    runner = click_testing.CliRunner()
    r = runner.invoke(verify_command, [str(good), "--device", "cpu", "-o", str(out)])
    assert r.exit_code == 0 and r.stdout == ""
    assert "good.py:train_step" in out.read_text()
    r = runner.invoke(verify_command, [str(good), "--device", "cpu", "--arg", "nope"])
    assert r.exit_code == 2 and "expected NAME=VALUE" in r.output
    r = runner.invoke(verify_command, [str(good), "--device", "cpu", "--arg", "nope=1"])
    assert r.exit_code == 2 and "--arg nope: no parameter" in r.stderr
    r = runner.invoke(verify_command, [str(good), "--device", "cpu", "--function", "fit"])
    assert r.exit_code == 2 and "no function or method named 'fit'" in r.stderr


def test_help_texts_name_the_exit_codes():
    runner = click_testing.CliRunner()
    v = runner.invoke(verify_command, ["--help"]).output
    t = runner.invoke(trace_command, ["--help"]).output
    for text in (v, t):
        assert "Exit status:" in text and "usage error" in text
    assert "1  a check failed" in v and "never a top-level" in v
    assert "1  an AMP misuse was found" in t and "--fail-if-unchecked" in t and "torchrun" in t


def test_click_trace_command_with_an_output_file(tmp_path, capfd):
    p = _script(tmp_path, "opt.step()")
    out_file = tmp_path / "report.txt"
    r = click_testing.CliRunner().invoke(trace_command, ["-o", str(out_file), str(p), "1"])  # no `--`
    assert r.exit_code == 1, r.output
    assert r.stdout == ""
    assert out_file.read_text().startswith(f"{p}:16: AMP004 optimizer.step() called directly")
    assert "done ['1']" in capfd.readouterr().out  # the program's own stdout is untouched


def test_commands_without_torch(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    runner = click_testing.CliRunner()
    r = runner.invoke(verify_command, [])
    assert r.exit_code == 2
    from amplint.meta import PROJECT_URL

    # torch from its CPU index (an unpinned PyPI torch is the CUDA build), then the extra
    assert "amplint verify needs torch: pip install torch --index-url https://download.pytorch.org/whl/cpu" in r.output
    assert "pip install '.[runtime]' in a clone of amplint" in r.output
    assert f'pip install "amplint[runtime] @ git+{PROJECT_URL}"' in r.output
    p = _script(tmp_path, "pass")
    r = runner.invoke(trace_command, ["--", str(p)])
    assert r.exit_code == 2 and "amplint trace needs torch" in r.output


def test_runtime_package_does_not_import_torch():
    code = ("import sys, amplint.runtime, amplint.runtime.commands, amplint.runtime.trace, "
            "amplint.runtime.childtrace; print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.stdout.strip() == "False", r.stderr


def test_static_core_does_not_import_the_runtime_or_torch():
    code = ("import sys, amplint.model, amplint.pipeline, amplint.cli; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('amplint.runtime')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.stdout.strip() == "[]", r.stderr


def test_trace_refuses_an_interactive_python(capsys):
    assert trace.main(["--", "python", "-u"]) == 2
    assert "give python a script or -m module" in capsys.readouterr().err
