"""The server's engine adapter in process (amplint.server.workspace.Workspace)."""

from __future__ import annotations

import os
import shutil

from lsprotocol import types
from pygls import uris
from pygls.workspace.position_codec import PositionCodec

from amplint.server.workspace import Cell, ServerOptions, Workspace
from lsp_util import FIXTURES, apply_edits, read

LOOP = """import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    {prefix}scaler.step(optimizer)
"""


def test_columns_are_converted_to_the_negotiated_encoding(tmp_path):
    text = LOOP.format(prefix='s = "\U0001f600"; ')  # a character outside the BMP before the finding
    path = tmp_path / "t.py"
    path.write_text(text, encoding="utf-8")
    ws = Workspace()
    got = {}
    for enc in (types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf32, types.PositionEncodingKind.Utf8):
        ws.codec = PositionCodec(enc)
        [d] = ws.diagnose(uris.from_fs_path(str(path)), text)
        got[enc] = (d.range.start.character, d.range.end.character)
    cp = len('    s = "\U0001f600"; ')
    n = len("scaler.step(optimizer)")
    assert got[types.PositionEncodingKind.Utf32] == (cp, cp + n)
    assert got[types.PositionEncodingKind.Utf16] == (cp + 1, cp + 1 + n)
    assert got[types.PositionEncodingKind.Utf8] == (cp + 3, cp + 3 + n)


def test_deprecated_api_is_tagged_and_a_warning(tmp_path):
    text = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
    path = tmp_path / "t.py"
    path.write_text(text)
    diags = Workspace().diagnose(uris.from_fs_path(str(path)), text)
    amp101 = [d for d in diags if d.code == "AMP101"]
    assert amp101 and amp101[0].severity == types.DiagnosticSeverity.Warning
    assert amp101[0].tags == [types.DiagnosticTag.Deprecated]


def test_a_broken_config_falls_back_to_the_defaults_and_says_so(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.amplint]\nnope = 1\n")
    shutil.copy(os.path.join(FIXTURES, "amp001_missing_scaler_update", "before.py"), tmp_path / "t.py")
    told = []
    ws = Workspace()
    ws.on_config_error = told.append
    path = tmp_path / "t.py"
    assert [d.code for d in ws.diagnose(uris.from_fs_path(str(path)), read(path))] == ["AMP001"]
    assert len(told) == 1 and "unknown key in [tool.amplint]: `nope`" in told[0]


def test_server_flags_apply_on_top_of_the_config(tmp_path):
    shutil.copy(os.path.join(FIXTURES, "amp001_missing_scaler_update", "before.py"), tmp_path / "t.py")
    path = tmp_path / "t.py"
    ws = Workspace(ServerOptions(ignore=("AMP001",)))
    assert ws.diagnose(uris.from_fs_path(str(path)), read(path)) == []


def test_force_exclude_skips_an_excluded_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.amplint]\nforce-exclude = true\nextend-exclude = ["gen"]\n')
    (tmp_path / "gen").mkdir()
    path = tmp_path / "gen" / "t.py"
    shutil.copy(os.path.join(FIXTURES, "amp001_missing_scaler_update", "before.py"), path)
    assert Workspace().diagnose(uris.from_fs_path(str(path)), read(path)) == []


def test_notebook_fix_all_edits_only_the_changed_cell(tmp_path):
    cells = [Cell("c0", 'import torch\nscaler = torch.amp.GradScaler("cuda")\n'),
             Cell("c1", "for x in loader:\n    scaler.scale(model(x)).backward()\n    scaler.step(optimizer)")]
    ws = Workspace()
    diags = ws.diagnose_notebook(uris.from_fs_path(str(tmp_path / "n.ipynb")), cells)
    assert [d.code for d in diags["c1"]] == ["AMP001"] and diags["c0"] == []
    actions = ws.code_actions("c1", None, types.Range(types.Position(0, 0), types.Position(0, 0)), ["source.fixAll"])
    [fix_all] = actions
    assert list(fix_all.edit.changes) == ["c1"]
    # the cell had no final newline; it still has none after the fix
    assert apply_edits(cells[1].text, fix_all.edit.changes["c1"]) == cells[1].text + "\n    scaler.update()"
