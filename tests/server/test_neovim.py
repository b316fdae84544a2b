"""A real editor: Neovim (headless) as the LSP client of `amplint server` (skipped when nvim
is not installed; Debian's `neovim` package is 0.7, which has `vim.lsp.start_client`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from lsp_util import ENV, FIXTURES, read

AMP001 = os.path.join(FIXTURES, "amp001_missing_scaler_update")

SCRIPT = r"""
vim.cmd("edit " .. TRAIN)
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start_client({ name = "amplint", cmd = SERVER, root_dir = ROOT })
vim.lsp.buf_attach_client(buf, id)
local out = {}
local function say(s) table.insert(out, s) end
say("arrived " .. tostring(vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50)))
for _, d in ipairs(vim.diagnostic.get(buf)) do
  say(string.format("diagnostic %s %d:%d-%d:%d %d", d.code or "?", d.lnum, d.col, d.end_lnum, d.end_col, d.severity))
end
local uri = vim.uri_from_bufnr(buf)
local h = vim.lsp.buf_request_sync(buf, "textDocument/hover", { textDocument = { uri = uri }, position = { line = 16, character = 12 } }, 20000)
for _, r in pairs(h or {}) do if r.result then say("hover " .. r.result.contents.kind) end end
local res = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", { textDocument = { uri = uri },
  range = { start = { line = 16, character = 0 }, ["end"] = { line = 16, character = 0 } },
  context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics(buf, 16) } }, 20000)
local client = vim.lsp.get_client_by_id(id)
for _, r in pairs(res or {}) do
  for _, a in ipairs(r.result or {}) do
    say("action " .. a.kind .. " " .. a.title)
    if a.title:find("^Insert") then vim.lsp.util.apply_workspace_edit(a.edit, client.offset_encoding) end
  end
end
vim.cmd("write! " .. FIXED)
say("cleared " .. tostring(vim.wait(60000, function() return #vim.diagnostic.get(buf) == 0 end, 50)))
vim.fn.writefile(out, REPORT)
vim.cmd("qa!")
"""


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is not installed")
def test_neovim_shows_the_finding_and_applies_the_fix(tmp_path):
    train, fixed, report = tmp_path / "train.py", tmp_path / "fixed.py", tmp_path / "report.txt"
    shutil.copy(os.path.join(AMP001, "before.py"), train)

    def lua(s):
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    head = (f"TRAIN = {lua(train)}\nFIXED = {lua(fixed)}\nREPORT = {lua(report)}\nROOT = {lua(tmp_path)}\n"
            f"SERVER = {{ {lua(sys.executable)}, \"-m\", \"amplint\", \"server\", \"--debounce\", \"0.05\" }}\n")
    script = tmp_path / "try.lua"
    script.write_text(head + SCRIPT)
    env = {**ENV, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    subprocess.run(["nvim", "--headless", "-u", "NONE", "-n", "-i", "NONE", "-c", f"luafile {script}"],
                   cwd=tmp_path, env=env, capture_output=True, timeout=240, stdin=subprocess.DEVNULL)
    lines = report.read_text().splitlines()
    assert lines[:2] == ["arrived true", "diagnostic AMP001 16:8-16:30 1"]
    assert "hover markdown" in lines
    assert "action quickfix Insert `scaler.update()` after `scaler.step(...)` (AMP001)" in lines
    assert "action quickfix Add `# noqa: AMP001`" in lines
    assert "action source.fixAll.amplint amplint: fix all safe fixes" in lines
    assert lines[-1] == "cleared true"
    assert read(fixed) == read(os.path.join(AMP001, "after.py"))
