"""Jupyter notebooks: checked cell by cell (ruff's `path:cell N:row:col`), fixed in place with
only the changed cells' "source" rewritten; IPython magics never crash the parse and are
never written back changed."""
import json
import os
import shutil

import pytest

from integ_util import run_amplint

EVIDENCE = os.environ.get("AMPLINT_EVIDENCE_DIR")


def code(src, outputs=(), count=None, metadata=None, as_string=False):
    return {
        "cell_type": "code",
        "execution_count": count,
        "metadata": metadata or {},
        "outputs": list(outputs),
        "source": src if as_string else src.splitlines(keepends=True),
    }


def markdown(src):
    return {"cell_type": "markdown", "metadata": {}, "source": src.splitlines(keepends=True)}


META = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python", "version": "3.11.7"},
}
OUTPUT = {"name": "stdout", "output_type": "stream", "text": ["loss 0.25\n", "héllo ✓\n"]}
IMAGE = {"data": {"image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSAAAADUlEQVR42mNk", "text/plain": ["<Figure>"]},
         "metadata": {"needs_background": "light"}, "output_type": "display_data"}

SETUP = '''%matplotlib inline
!pip install -q torch
import torch
files = !ls
torch.cuda.is_available?
scaler = torch.amp.GradScaler("cuda")'''

LOOP = '''%%time
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    %time scaler.step(optimizer)
    scaler.step(optimizer)'''


def notebook(cells, indent=1, trailing_newline=True, ensure_ascii=False):
    nb = {"cells": cells, "metadata": META, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=indent, ensure_ascii=ensure_ascii) + ("\n" if trailing_newline else "")


def training_notebook(**kw):
    return notebook(
        [
            markdown("# AMP training\nThe scaler is made in one cell and stepped in another."),
            code(SETUP, count=1, metadata={"tags": ["setup"]}),
            code("%%bash\n  echo 'not python: def ('\n", outputs=[OUTPUT], count=2),
            code(LOOP, outputs=[OUTPUT, IMAGE], count=3, metadata={"scrolled": True}),
            code("print(loss)  # unrelated", count=4),
        ],
        **kw,
    )


@pytest.fixture
def nb_path(tmp_path):
    p = tmp_path / "train.ipynb"
    p.write_text(training_notebook(), encoding="utf-8")
    return p


def _check(cwd, *args):
    return run_amplint("check", "--no-cache", *args, cwd=cwd)


def test_findings_point_at_cell_and_row_across_cells(nb_path):
    p = _check(nb_path.parent, "--output-format", "concise", "train.ipynb")
    assert p.returncode == 1, p.stderr
    # cell 4 is the fourth cell of the notebook (markdown cells count, as in ruff); row 7 of it
    assert p.stdout.splitlines()[0].startswith("train.ipynb:cell 4:7:5: AMP001 [*]")
    assert "E999" not in p.stdout  # the magics did not break the parse

    (row,) = json.loads(_check(nb_path.parent, "--output-format", "json", "train.ipynb").stdout)
    assert row["cell"] == 4
    assert row["location"] == {"row": 7, "column": 5}
    assert row["end_location"] == {"row": 7, "column": 27}
    assert row["noqa_row"] == 7
    (edit,) = row["fix"]["edits"]
    assert edit["content"] == "    scaler.update()\n" and edit["location"]["row"] == 8

    full = _check(nb_path.parent, "train.ipynb").stdout
    assert "7 |     scaler.step(optimizer)" in full  # the cell's own line


def test_fix_rewrites_only_the_changed_cell(nb_path):
    before = nb_path.read_text(encoding="utf-8")
    p = run_amplint("fix", "--no-cache", "train.ipynb", cwd=nb_path.parent)
    assert p.returncode == 0, p.stdout + p.stderr
    after = nb_path.read_text(encoding="utf-8")
    old, new = json.loads(before), json.loads(after)
    assert new["metadata"] == old["metadata"]
    for i, (a, b) in enumerate(zip(old["cells"], new["cells"])):
        if i != 3:
            assert a == b
        else:
            assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
    assert "".join(new["cells"][3]["source"]) == LOOP + "\n    scaler.update()"
    # the magics are written back exactly
    assert new["cells"][3]["source"][0] == "%%time\n"
    assert new["cells"][3]["source"][5] == "    %time scaler.step(optimizer)\n"
    # same JSON layout: indent 1, raw UTF-8, trailing newline; only the "source" lines differ
    assert after == training_notebook().replace(
        '    "    scaler.step(optimizer)"\n', '    "    scaler.step(optimizer)\\n",\n    "    scaler.update()"\n'
    )
    assert _check(nb_path.parent, "train.ipynb").returncode == 0
    if EVIDENCE:
        os.makedirs(EVIDENCE, exist_ok=True)
        with open(os.path.join(EVIDENCE, "notebook_before.ipynb"), "w", encoding="utf-8") as fh:
            fh.write(before)
        shutil.copy(nb_path, os.path.join(EVIDENCE, "notebook_after.ipynb"))


@pytest.mark.parametrize(
    "layout", [dict(indent=2, trailing_newline=False), dict(indent=4, ensure_ascii=True), dict(indent=None)]
)
def test_fix_keeps_the_json_layout(tmp_path, layout):
    p = tmp_path / "nb.ipynb"
    p.write_text(training_notebook(**layout), encoding="utf-8")
    assert run_amplint("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    got = p.read_text(encoding="utf-8")
    expected = json.loads(training_notebook(**layout))
    expected["cells"][3]["source"][-1] += "\n"
    expected["cells"][3]["source"].append("    scaler.update()")
    assert got == notebook(expected["cells"], **layout)


def test_fix_keeps_a_string_source_a_string(tmp_path):
    p = tmp_path / "nb.ipynb"
    p.write_text(notebook([code(SETUP + "\n", as_string=True), code(LOOP + "\n", as_string=True)]))
    assert run_amplint("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    cells = json.loads(p.read_text())["cells"]
    assert cells[0]["source"] == SETUP + "\n"
    assert cells[1]["source"] == LOOP + "\n    scaler.update()\n"


def test_insertion_before_a_cells_first_statement_stays_in_that_cell(tmp_path):
    p = tmp_path / "clip.ipynb"
    first = 'import torch\nscaler = torch.amp.GradScaler("cuda")\nwith torch.autocast("cuda"):\n    loss = model(x).sum()\nscaler.scale(loss).backward()'
    second = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nscaler.step(opt)\nscaler.update()"
    p.write_text(notebook([code(first), code(second)]))
    c = _check(tmp_path, "--output-format", "concise", "clip.ipynb")
    assert c.stdout.startswith("clip.ipynb:cell 2:1:1: AMP006"), c.stdout
    assert run_amplint("fix", "--no-cache", "clip.ipynb", cwd=tmp_path).returncode == 0
    cells = json.loads(p.read_text())["cells"]
    assert "".join(cells[0]["source"]) == first
    assert "".join(cells[1]["source"]) == "scaler.unscale_(opt)\n" + second


def test_diff_is_per_cell_and_writes_nothing(nb_path):
    before = nb_path.read_bytes()
    p = _check(nb_path.parent, "--diff", "train.ipynb")
    assert p.returncode == 1
    assert p.stdout.startswith("--- train.ipynb:cell 4\n+++ train.ipynb:cell 4\n")
    assert "+    scaler.update()\n" in p.stdout
    assert "__amplint" not in p.stdout
    assert nb_path.read_bytes() == before


def test_noqa_and_add_noqa_in_a_cell(nb_path):
    p = _check(nb_path.parent, "--add-noqa", "train.ipynb")
    assert p.returncode == 0, p.stdout + p.stderr
    cells = json.loads(nb_path.read_text())["cells"]
    assert cells[3]["source"][6] == "    scaler.step(optimizer)  # noqa: AMP001"
    assert cells[3]["source"][5] == "    %time scaler.step(optimizer)\n"
    assert _check(nb_path.parent, "train.ipynb").returncode == 0


def test_magics_only_and_syntax_errors(tmp_path):
    nb = tmp_path / "nb.ipynb"
    nb.write_text(notebook([
        code("%load_ext autoreload\n%autoreload 2\n??torch\n"),
        code("import torch\nscaler = torch.amp.GradScaler()\n"),
        code("def broken(:\n    pass\n"),
    ]))
    p = _check(tmp_path, "--output-format", "json", "nb.ipynb")
    (err,) = json.loads(p.stdout)
    assert err["code"] == "E999" and err["cell"] == 3 and err["location"]["row"] == 1
    assert p.returncode == 1


def test_non_python_and_invalid_notebooks(tmp_path):
    r = tmp_path / "r.ipynb"
    nb = json.loads(notebook([code("scaler <- 1\nscaler$step()\n")]))
    nb["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}, "language_info": {"name": "R"}}
    r.write_text(json.dumps(nb))
    assert _check(tmp_path, "r.ipynb").returncode == 0
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [ {"cell_type": "code", "source": "scaler = GradScaler()"')
    p = _check(tmp_path, "--output-format", "concise", "bad.ipynb")
    assert p.returncode == 1 and "bad.ipynb:1:1: E902 not a valid notebook" in p.stdout


def test_directories_include_notebooks(nb_path):
    (nb_path.parent / "train.py").write_text("x = 1\n")
    p = run_amplint("check", "--show-files", ".", cwd=nb_path.parent)
    assert sorted(os.path.basename(x) for x in p.stdout.split()) == ["train.ipynb", "train.py"]


def test_virtual_module_line_map():
    """Unit level: rows map to (cell, row in cell); magic lines keep the line count."""
    from amplint.notebook import load_notebook

    nb = load_notebook(training_notebook(), "t.ipynb")
    lines = nb.virtual.splitlines()
    assert len(lines) == 6 + 1 + 2 + 1 + 7 + 1 + 1
    assert nb.position(1) == (2, 1) and nb.position(6) == (2, 6)
    assert nb.position(8) == (3, 1)  # the %%bash cell, masked whole
    assert nb.position(17) == (4, 7) and lines[16] == "    scaler.step(optimizer)"
    assert lines[15].strip().startswith("__amplint_magic_")  # `%time ...` inside the loop, same indent
    assert lines[15].startswith("    __amplint")
    assert nb.split(nb.virtual) == nb.cell_texts  # round trip
    assert nb.render(nb.virtual) == training_notebook()
