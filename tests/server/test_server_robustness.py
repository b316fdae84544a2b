"""The server never takes the editor session down: a rule that crashes, a file too big for the
time budget, and `amplint check` never loads the server's dependencies."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_util import ENV, FIXTURES, config, initialize, mark, open_doc, published, read, stop, uri

AMP001 = os.path.join(FIXTURES, "amp001_missing_scaler_update", "before.py")

# a real server process in which one rule (AMP002) raises on every file
CRASHING_RULE = (
    "import amplint.rules as r\n"
    "def boom(model): raise ZeroDivisionError('planted')\n"
    "r.ALL_RULES['AMP002'].check = boom\n"
    "from amplint.cli import main\n"
    "main(['server', '--debounce', '0.05'])\n"
)


@pytest_lsp.fixture(config=config(command=[sys.executable, "-c", CRASHING_RULE]))
async def crashing(lsp_client: LanguageClient, tmp_path):
    await initialize(lsp_client, tmp_path)
    yield
    await stop(lsp_client)


@pytest_lsp.fixture(config=config("--per-file-timeout", "0.05"))
async def hurried(lsp_client: LanguageClient, tmp_path):
    await initialize(lsp_client, tmp_path)
    yield
    await stop(lsp_client)


@pytest.mark.asyncio
async def test_a_crashing_rule_is_logged_and_the_others_still_report(crashing: LanguageClient, tmp_path):
    path = tmp_path / "train.py"
    shutil.copy(AMP001, path)
    since = mark(crashing)
    open_doc(crashing, uri(path), read(path))
    diags = await published(crashing, uri(path), since)
    assert sorted(d.code for d in diags) == ["AMP001", "AMP900"]
    amp900 = next(d for d in diags if d.code == "AMP900")
    assert "internal error in AMP002: ZeroDivisionError: planted" in amp900.message
    assert any(m.type == types.MessageType.Error and "AMP900" in m.message and "planted" in m.message
               for m in crashing.log_messages)
    hover = await crashing.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)), position=types.Position(16, 12)))
    assert "missing-scaler-update" in hover.contents.value  # still serving


def _huge_training_file(n_loops: int) -> str:
    loop = read(AMP001).split("import torch\n", 1)[1]
    parts = ["import torch\n"]
    for i in range(n_loops):
        parts.append(loop.replace("def train_loop(", f"def train_loop_{i}(").replace('if __name__ == "__main__":', f"if __name__ == 'm{i}':"))
    return "".join(parts)


@pytest.mark.asyncio
async def test_a_huge_file_respects_the_per_file_timeout(hurried: LanguageClient, tmp_path):
    big = tmp_path / "big.py"
    text = _huge_training_file(1500)  # ~40,000 lines: far more than 0.05 s of analysis
    big.write_text(text)
    since = mark(hurried)
    open_doc(hurried, uri(big), text)
    diags = await published(hurried, uri(big), since)
    assert [d.code for d in diags] == ["AMP901"]
    assert "timeout: analysis took longer than 0.05 s" in diags[0].message
    # the server goes on with the next document
    small = tmp_path / "train.py"
    shutil.copy(AMP001, small)
    since = mark(hurried)
    open_doc(hurried, uri(small), read(small))
    assert [d.code for d in await published(hurried, uri(small), since)] == ["AMP001"]


def test_check_never_imports_the_server_dependencies(tmp_path):
    path = tmp_path / "train.py"
    shutil.copy(AMP001, path)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "amplint", "check", "--no-cache", str(path)],
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 1 and "AMP001" in out.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "amplint.rules" in imported  # the probe sees the run's imports
    assert not {m for m in imported if m.split(".")[0] in ("pygls", "lsprotocol", "cattrs") or m.startswith("amplint.server")}


def test_without_the_extra_the_command_says_what_to_install():
    code = "import sys; sys.modules['pygls'] = None\nfrom amplint.cli import main\nmain(['server'])\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "`amplint server` is unavailable" in out.stderr
    from amplint.meta import PROJECT_URL

    # a hint that works where amplint is not published: from a clone, or from git
    assert "pip install '.[server]' in a clone of amplint" in out.stderr
    assert f'pip install "amplint[server] @ git+{PROJECT_URL}"' in out.stderr
