"""Drive the real `amplint server` over stdio with pytest-lsp's client (pygls)."""

from __future__ import annotations

import asyncio
import os
import sys

from lsprotocol import types
from pygls import uris
from pygls.workspace import TextDocument
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pygls.protocol import default_converter

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "fixtures")
# a short debounce keeps the tests quick; the debounce itself is exercised by every didChange
SERVER = [sys.executable, "-m", "amplint", "server", "--debounce", "0.05"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AMPLINT_")}
TIMEOUT = 60.0


def uri(path) -> str:
    return uris.from_fs_path(str(path))


def capabilities(caps: str = "visual-studio-code") -> types.ClientCapabilities:
    """A real client's capabilities (pytest-lsp's recorded VS Code 1.65), plus notebook sync
    (LSP 3.17, which later VS Code versions send)."""
    c = client_capabilities(caps)
    c.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(execution_summary_support=True))
    return c


async def initialize(client, root, caps: str = "visual-studio-code") -> types.InitializeResult:
    return await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(caps),
        root_uri=uri(root),
        workspace_folders=[types.WorkspaceFolder(uri=uri(root), name="project")],
    ))


def _on_publish(client: LanguageClient, params: types.PublishDiagnosticsParams):
    client.diagnostics[params.uri] = params.diagnostics
    client.publish_counts[params.uri] = client.publish_counts.get(params.uri, 0) + 1
    client.versions[params.uri] = params.version
    client.publish_event.set()


def _on_register(client: LanguageClient, params: types.RegistrationParams):  # VS Code accepts the file watcher
    client.registrations.extend(params.registrations)


def make_client() -> LanguageClient:
    """pytest-lsp's test client, counting every publishDiagnostics (an empty list is a new
    publication too) and accepting client/registerCapability as VS Code does."""
    client = LanguageClient(converter_factory=default_converter)
    client.publish_counts, client.publish_event, client.registrations, client.versions = {}, asyncio.Event(), [], {}
    register_lsp_features(client, {
        **DEFAULT_CLIENT_FEATURES,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _on_publish,
        types.CLIENT_REGISTER_CAPABILITY: _on_register,
    })
    return client


def config(*args: str, command=None) -> ClientServerConfig:
    return ClientServerConfig(server_command=command or [*SERVER, *args], server_env=ENV, client_factory=make_client)


def mark(client) -> dict:
    """How many publications each document had so far; `published` waits for the next."""
    return dict(client.publish_counts)


async def published(client, doc_uri: str, since: dict, timeout: float = TIMEOUT) -> list[types.Diagnostic]:
    """The diagnostics of ``doc_uri`` from the first publishDiagnostics after ``since``."""
    async def wait():
        while client.publish_counts.get(doc_uri, 0) <= since.get(doc_uri, 0):
            if client.error is not None:
                raise client.error
            client.publish_event.clear()
            await client.publish_event.wait()
        return list(client.diagnostics[doc_uri])

    return await asyncio.wait_for(wait(), timeout)


def open_doc(client, doc_uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=doc_uri, language_id="python", version=version, text=text)))


def change_doc(client, doc_uri: str, text: str, version: int) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=doc_uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply TextEdits the way a client does (pygls' own document model, last edit first)."""
    doc = TextDocument("file:///x.py", text)
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        doc.apply_change(types.TextDocumentContentChangePartial(range=e.range, text=e.new_text))
    return doc.source


def read(path) -> str:
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


async def stop(client) -> None:
    """shutdown + exit; a server that does not go kills the test's teardown otherwise."""
    try:
        if client.capabilities is not None and client.error is None:
            await asyncio.wait_for(client.shutdown_session(), 20)
    finally:
        server = getattr(client, "_server", None)
        if server is not None and server.returncode is None:
            server.kill()
