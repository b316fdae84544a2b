"""`flake8 --select AMP` through the registered entry point, as a subprocess."""
import os
import shutil
import subprocess
import sys

import flake8 as _flake8  # noqa: F401  (the `test` extra installs it: a broken install fails here, not skips)

from integ_util import MISUSE, run_amplint

EVIDENCE = os.environ.get("AMPLINT_EVIDENCE_DIR")

FIXTURE = MISUSE + '''
opt_scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda"):
    out = model(x)
    opt_scaler.scale(out.sum()).backward()  # noqa: AMP002
opt_scaler.step(opt)
opt_scaler.update()
'''


def flake8(*args, cwd):
    return subprocess.run([sys.executable, "-m", "flake8", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_plugin_is_registered():
    p = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert "amplint" in p.stdout, p.stdout


def test_flake8_reports_the_same_rows_and_columns_as_amplint(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(FIXTURE)
    p = flake8("--select", "AMP", "train.py", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert lines == ["train.py:8:5: AMP001 `scaler.step()` without a later `scaler.update()` in the iteration; "
                     "the next step raises \"step() has already been called since the last update()\""]
    # the same position as amplint's own report (1-based column: flake8 adds 1 to our 0-based one)
    a = run_amplint("check", "--no-cache", "--output-format", "concise", "--select", "AMP001", "train.py", cwd=tmp_path)
    assert a.stdout.splitlines()[0].startswith("train.py:8:5: AMP001")
    if EVIDENCE:
        os.makedirs(EVIDENCE, exist_ok=True)
        shutil.copy(f, os.path.join(EVIDENCE, "flake8_fixture.py"))
        with open(os.path.join(EVIDENCE, "flake8-output.txt"), "w") as fh:
            fh.write(f"$ flake8 --select AMP train.py\n{p.stdout}[exit {p.returncode}]\n\n"
                     f"$ amplint check --output-format concise train.py\n{a.stdout}")


def test_flake8_noqa_and_selection(tmp_path):
    (tmp_path / "train.py").write_text(FIXTURE)
    # the AMP002 on the `# noqa: AMP002` line is suppressed by flake8 itself
    p = flake8("--select", "AMP", "--disable-noqa", "train.py", cwd=tmp_path)
    codes = [line.split()[1] for line in p.stdout.splitlines()]
    assert codes == ["AMP001", "AMP002"], p.stdout
    p = flake8("--select", "AMP", "--extend-ignore", "AMP001", "train.py", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""
    # other plugins' codes are not AMP's business
    p = flake8("--select", "E,W,F", "train.py", cwd=tmp_path)
    assert "AMP" not in p.stdout


def test_flake8_honours_amplint_config(tmp_path):
    (tmp_path / "train.py").write_text(FIXTURE)
    (tmp_path / "pyproject.toml").write_text('[tool.amplint]\nignore = ["AMP001"]\n')
    p = flake8("--select", "AMP", "--disable-noqa", "train.py", cwd=tmp_path)
    assert [line.split()[1] for line in p.stdout.splitlines()] == ["AMP002"]
    (tmp_path / "pyproject.toml").write_text('[tool.amplint.per-file-ignores]\n"train.py" = ["AMP"]\n')
    p = flake8("--select", "AMP", "train.py", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""


def test_checker_class_directly():
    """0-based columns in the tuples flake8 receives; files without AMP tokens yield nothing."""
    import ast

    from amplint.flake8_plugin import AmplintChecker

    lines = MISUSE.splitlines(keepends=True)
    out = list(AmplintChecker(ast.parse(MISUSE), "train.py", lines).run())
    assert [(r, c, m.split()[0]) for r, c, m, _ in out] == [(8, 4, "AMP001")]
    assert out[0][3] is AmplintChecker
    assert list(AmplintChecker(ast.parse("x = 1\n"), "x.py", ["x = 1\n"]).run()) == []
