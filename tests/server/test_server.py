"""End-to-end: the real `amplint server` subprocess, driven over stdio by a real LSP client
(pytest-lsp, built on pygls)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_util import ENV, FIXTURES, apply_edits, config, change_doc, initialize, mark, open_doc, published, read, stop, uri

AMP001 = os.path.join(FIXTURES, "amp001_missing_scaler_update")


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, tmp_path):
    await initialize(lsp_client, tmp_path)
    yield
    await stop(lsp_client)


@pytest_lsp.fixture(config=config())
async def fresh_client(lsp_client: LanguageClient):
    yield  # not initialized yet
    await stop(lsp_client)


@pytest.fixture
def project(tmp_path):
    """A project with the AMP001 fixture's buggy file in it."""
    shutil.copy(os.path.join(AMP001, "before.py"), tmp_path / "train.py")
    return tmp_path


def cli_json(path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "amplint", "check", "--no-cache", "--output-format", "json", str(path)],
                         capture_output=True, text=True, env=ENV, cwd=os.path.dirname(path), timeout=120)
    return json.loads(out.stdout)


@pytest.mark.asyncio
async def test_initialize_advertises_the_features(fresh_client: LanguageClient, tmp_path):
    result = await initialize(fresh_client, tmp_path)
    caps = result.capabilities
    assert result.server_info.name == "amplint"
    assert set(caps.code_action_provider.code_action_kinds) == {"quickfix", "source.fixAll.amplint"}
    assert caps.hover_provider
    assert caps.notebook_document_sync.notebook_selector[0].cells[0].language == "python"


@pytest.mark.asyncio
async def test_buggy_file_gets_the_cli_findings_with_ranges(client: LanguageClient, project):
    path = project / "train.py"
    since = mark(client)
    open_doc(client, uri(path), read(path))
    diags = await published(client, uri(path), since)

    assert [(d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character) for d in diags] == [
        ("AMP001", 16, 8, 16, 30)  # `scaler.step(optimizer)` on line 17
    ]
    d = diags[0]
    assert d.source == "amplint"
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.code_description.href.endswith("docs/rules.md#amp001-missing-scaler-update")
    # the same engine as `amplint check`: same codes, messages, rows and columns
    cli = cli_json(path)
    assert [(m["code"], m["message"], m["location"]["row"] - 1, m["location"]["column"] - 1, m["end_location"]["row"] - 1,
             m["end_location"]["column"] - 1, m["url"]) for m in cli] == [
        (x.code, x.message, x.range.start.line, x.range.start.character, x.range.end.line, x.range.end.character,
         x.code_description.href) for x in diags
    ]


@pytest.mark.asyncio
async def test_code_actions_turn_the_file_into_the_fixed_fixture(client: LanguageClient, project):
    path = project / "train.py"
    text = read(path)
    since = mark(client)
    open_doc(client, uri(path), text)
    diags = await published(client, uri(path), since)

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)),
        range=types.Range(types.Position(16, 0), types.Position(16, 0)),  # the cursor at the start of the line
        context=types.CodeActionContext(diagnostics=diags, trigger_kind=types.CodeActionTriggerKind.Invoked),
    ))
    by_title = {a.title: a for a in actions}
    assert set(by_title) == {"Insert `scaler.update()` after `scaler.step(...)` (AMP001)", "Add `# noqa: AMP001`",
                             "amplint: fix all safe fixes"}
    fix = by_title["Insert `scaler.update()` after `scaler.step(...)` (AMP001)"]
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    assert [x.code for x in fix.diagnostics] == ["AMP001"]
    after = read(os.path.join(AMP001, "after.py"))
    assert apply_edits(text, fix.edit.changes[uri(path)]) == after  # byte for byte
    assert apply_edits(text, by_title["amplint: fix all safe fixes"].edit.changes[uri(path)]) == after
    noqa = apply_edits(text, by_title["Add `# noqa: AMP001`"].edit.changes[uri(path)])
    assert noqa == text.replace("        scaler.step(optimizer)\n", "        scaler.step(optimizer)  # noqa: AMP001\n")

    # source.fixAll.amplint on its own (an editor's "fix all on save")
    only = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.fixAll"]),
    ))
    assert [a.kind for a in only] == ["source.fixAll.amplint"]

    # didChange to the fixed text: the diagnostics are cleared (after the debounce)
    since = mark(client)
    change_doc(client, uri(path), after, 2)
    assert await published(client, uri(path), since) == []
    # and the noqa'd text reports nothing either
    since = mark(client)
    change_doc(client, uri(path), noqa, 3)
    assert await published(client, uri(path), since) == []


@pytest.mark.asyncio
async def test_unsafe_fix_is_labelled(client: LanguageClient, tmp_path):
    # AMP201's fix (add a GradScaler) is unsafe
    src = os.path.join(FIXTURES, "amp201_fp16_autocast_without_scaler", "before.py")
    path = tmp_path / "t.py"
    shutil.copy(src, path)
    text = read(path)
    since = mark(client)
    open_doc(client, uri(path), text)
    diags = [d for d in await published(client, uri(path), since) if d.code == "AMP201"]
    assert diags
    d = diags[0]
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)), range=d.range,
        context=types.CodeActionContext(diagnostics=[d])))
    unsafe = [a for a in actions if a.title.endswith("(unsafe)")]
    assert len(unsafe) == 1 and "AMP201" in unsafe[0].title and not unsafe[0].is_preferred
    assert not any(a.kind == "source.fixAll.amplint" for a in actions)  # fix-all applies safe fixes only
    # the unsafe edit is the one `amplint fix --unsafe-fixes` writes
    fixed = apply_edits(text, unsafe[0].edit.changes[uri(path)])
    assert fixed == read(os.path.join(FIXTURES, "amp201_fp16_autocast_without_scaler", "after.py"))


@pytest.mark.asyncio
async def test_hover_shows_the_rule_docs(client: LanguageClient, project):
    path = project / "train.py"
    since = mark(client)
    open_doc(client, uri(path), read(path))
    await published(client, uri(path), since)
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)), position=types.Position(16, 12)))
    assert hover.contents.kind == types.MarkupKind.Markdown
    from amplint.docs import rule_markdown
    from amplint.rules import ALL_RULES

    assert rule_markdown(ALL_RULES["AMP001"]) in hover.contents.value
    assert hover.range == types.Range(types.Position(16, 8), types.Position(16, 30))
    nothing = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)), position=types.Position(0, 0)))
    assert nothing is None


@pytest.mark.asyncio
async def test_syntax_error_is_e999_and_the_server_still_answers(client: LanguageClient, project):
    path = project / "train.py"
    text = read(path)
    broken = text.replace("scaler.step(optimizer)", "scaler.step(optimizer", 1)
    since = mark(client)
    open_doc(client, uri(path), broken)
    diags = await published(client, uri(path), since)
    assert [d.code for d in diags] == ["E999"]
    assert diags[0].severity == types.DiagnosticSeverity.Error
    assert "SyntaxError" in diags[0].message
    # still serving: requests are answered and the repaired text is checked
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)), range=diags[0].range,
        context=types.CodeActionContext(diagnostics=diags)))
    assert actions is None
    since = mark(client)
    change_doc(client, uri(path), text, 2)
    assert [d.code for d in await published(client, uri(path), since)] == ["AMP001"]


@pytest.mark.asyncio
async def test_settings_from_pyproject_reload_when_it_changes(client: LanguageClient, project):
    cfg = project / "pyproject.toml"
    cfg.write_text('[tool.amplint]\nignore = ["AMP001"]\n')
    path = project / "train.py"
    since = mark(client)
    open_doc(client, uri(path), read(path))
    assert await published(client, uri(path), since) == []
    # the server asked the client (which supports it) to watch pyproject.toml files
    assert [(r.method, r.register_options["watchers"][0]["globPattern"]) for r in client.registrations] == [
        ("workspace/didChangeWatchedFiles", "**/pyproject.toml")]

    cfg.write_text('[tool.amplint]\nignore = []\n')
    since = mark(client)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=uri(cfg), type=types.FileChangeType.Changed)]))
    assert [d.code for d in await published(client, uri(path), since)] == ["AMP001"]

    # a broken configuration: the defaults, and the user is told
    cfg.write_text('[tool.amplint]\nselect = ["NOPE"]\n')
    since = mark(client)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=uri(cfg), type=types.FileChangeType.Changed)]))
    assert [d.code for d in await published(client, uri(path), since)] == ["AMP001"]
    assert any("unknown rule selector `NOPE`" in m.message for m in client.messages)


@pytest.mark.asyncio
async def test_per_file_ignores_and_noqa_apply(client: LanguageClient, project):
    (project / "pyproject.toml").write_text('[tool.amplint]\nper-file-ignores = { "train.py" = ["AMP001"] }\n')
    path = project / "train.py"
    other = project / "other.py"
    shutil.copy(path, other)
    since = mark(client)
    open_doc(client, uri(path), read(path))
    assert await published(client, uri(path), since) == []
    since = mark(client)
    open_doc(client, uri(other), read(other))
    assert [d.code for d in await published(client, uri(other), since)] == ["AMP001"]


NOTEBOOK_CELLS = [
    ("code", "import torch\n\nscaler = torch.amp.GradScaler(\"cuda\")\n"),
    ("markdown", "# The loop\n"),
    ("code", "%matplotlib inline\nfor x, y in loader:\n    scaler.scale(loss_fn(model(x), y)).backward()\n    scaler.step(optimizer)\n"),
]


@pytest.mark.asyncio
async def test_notebook_cells(client: LanguageClient, tmp_path):
    nb_uri = uri(tmp_path / "train.ipynb")
    cells = [f"vscode-notebook-cell:{tmp_path}/train.ipynb#C{i}" for i in range(len(NOTEBOOK_CELLS))]
    since = mark(client)
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(uri=nb_uri, notebook_type="jupyter-notebook", version=1, cells=[
            types.NotebookCell(kind=types.NotebookCellKind.Code if k == "code" else types.NotebookCellKind.Markup, document=c)
            for c, (k, _) in zip(cells, NOTEBOOK_CELLS)]),
        cell_text_documents=[types.TextDocumentItem(uri=c, language_id="python" if k == "code" else "markdown", version=1, text=t)
                             for c, (k, t) in zip(cells, NOTEBOOK_CELLS)],
    ))
    diags = await published(client, cells[2], since)
    # the scaler made in cell 1 is understood in cell 3; the row is the cell's own
    assert [(d.code, d.range.start.line, d.range.start.character) for d in diags] == [("AMP001", 3, 4)]
    assert list(client.diagnostics[cells[0]]) == [] and list(client.diagnostics[cells[1]]) == []

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=cells[2]), range=diags[0].range,
        context=types.CodeActionContext(diagnostics=diags)))
    fix = next(a for a in actions if a.kind == types.CodeActionKind.QuickFix and "AMP001" in a.title and "noqa" not in a.title)
    assert list(fix.edit.changes) == [cells[2]]
    fixed = apply_edits(NOTEBOOK_CELLS[2][1], fix.edit.changes[cells[2]])
    assert fixed == NOTEBOOK_CELLS[2][1] + "    scaler.update()\n"  # the magic line untouched

    # editing the cell re-checks the notebook
    since = mark(client)
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=2),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=cells[2], version=2),
                changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)])]))))
    assert await published(client, cells[2], since) == []


@pytest.mark.asyncio
async def test_a_changed_document_re_diagnoses_the_other_open_ones(client: LanguageClient, project):
    """The server's half of cross-file analysis: a change to any document re-publishes every
    open document (so a project index only has to change what the engine returns)."""
    a, b = project / "train.py", project / "b.py"
    b.write_text("x = 1\n")
    since = mark(client)
    open_doc(client, uri(a), read(a))
    await published(client, uri(a), since)
    since = mark(client)
    open_doc(client, uri(b), read(b))
    await published(client, uri(b), since)
    since = mark(client)
    change_doc(client, uri(b), "x = 2\n", 2)
    assert [d.code for d in await published(client, uri(a), since)] == ["AMP001"]
    # and on save
    since = mark(client)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri(b))))
    assert [d.code for d in await published(client, uri(a), since)] == ["AMP001"]
    # closing a document clears its diagnostics
    since = mark(client)
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri(a))))
    assert await published(client, uri(a), since) == []


@pytest_lsp.fixture(config=config("--debounce", "0.5"))
async def slow_client(lsp_client: LanguageClient, tmp_path):
    await initialize(lsp_client, tmp_path)
    yield
    await stop(lsp_client)


@pytest.mark.asyncio
async def test_changes_in_quick_succession_are_checked_once(slow_client: LanguageClient, project):
    path = project / "train.py"
    text = read(path)
    after = read(os.path.join(AMP001, "after.py"))
    since = mark(slow_client)
    open_doc(slow_client, uri(path), text)
    await published(slow_client, uri(path), since)
    since = mark(slow_client)
    for version, t in enumerate([after, text, after], start=2):  # typing: well inside the 0.5 s debounce
        change_doc(slow_client, uri(path), t, version)
    assert await published(slow_client, uri(path), since) == []
    assert slow_client.versions[uri(path)] == 4  # one check, of the last version


HELPERS = "def step(scaler, opt):\n    scaler.step(opt)\n    scaler.update()\n"
TRAIN = """import torch
from helpers import step

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    step(scaler, optimizer)
"""


@pytest.mark.asyncio
async def test_helper_module_change_updates_the_file_that_uses_it(client: LanguageClient, tmp_path):
    helpers, train = tmp_path / "helpers.py", tmp_path / "train.py"
    helpers.write_text(HELPERS)
    train.write_text(TRAIN)
    since = mark(client)
    open_doc(client, uri(helpers), HELPERS)
    await published(client, uri(helpers), since)
    since = mark(client)
    open_doc(client, uri(train), TRAIN)
    before = await published(client, uri(train), since)
    assert [d.code for d in before] == []  # the helper updates the scaler

    since = mark(client)
    change_doc(client, uri(helpers), HELPERS.replace("    scaler.update()\n", ""), 2)
    after = await published(client, uri(train), since)
    assert "AMP001" in [d.code for d in after]  # no update() any more, anywhere in the iteration


HAS_INDEX = importlib.util.find_spec("amplint.model.index") is not None
BACK = "def back(scaler, loss):\n    scaler.scale(loss).backward()\n"
TRAIN_BACK = """import torch
from helpers import back

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
        back(scaler, loss)
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.xfail(not HAS_INDEX, strict=True, raises=AssertionError, reason="needs the project index (issue 15)")
@pytest.mark.asyncio
async def test_an_unsaved_helper_edit_updates_the_file_that_calls_it(client: LanguageClient, tmp_path):
    """AMP002 through a call into another module (project mode): the helper's buffer, not the
    file on disk, decides."""
    helpers, train = tmp_path / "helpers.py", tmp_path / "train.py"
    helpers.write_text(BACK)
    train.write_text(TRAIN_BACK)
    since = mark(client)
    open_doc(client, uri(train), TRAIN_BACK)
    assert [d.code for d in await published(client, uri(train), since)] == ["AMP002"]
    since = mark(client)
    open_doc(client, uri(helpers), BACK)
    await published(client, uri(helpers), since)
    since = mark(client)
    change_doc(client, uri(helpers), "def back(scaler, loss):\n    pass\n", 2)  # not saved
    assert await published(client, uri(train), since) == []
