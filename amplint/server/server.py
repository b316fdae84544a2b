"""`amplint server`: the Language Server Protocol glue (pygls) around amplint.server.workspace.

Diagnostics are published on open, on save and, debounced, on change; every change or save
of any document re-diagnoses every open document (the changed one first), so findings that
depend on other files follow them. Analysis runs on the server's main thread, one document
at a time, under the per-file time budget. A pyproject.toml that changes (saved in the
editor, or reported by the client's file watcher) reloads the settings of every file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from amplint import __version__
from amplint.server.workspace import FIX_ALL_KIND, Cell, ServerOptions, Workspace

DEFAULT_DEBOUNCE = 0.3  # seconds after the last change before a document is re-checked

log = logging.getLogger("amplint.server")

_LEVELS = {
    "error": types.MessageType.Error,
    "warning": types.MessageType.Warning,
    "info": types.MessageType.Info,
    "log": types.MessageType.Log,
}


class AmplintServer(LanguageServer):
    def __init__(self, options: ServerOptions | None = None, debounce: float = DEFAULT_DEBOUNCE):
        super().__init__(
            "amplint", __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[types.NotebookDocumentFilterWithCells(
                    notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")],
                )],
                save=True,
            ),
        )
        self.debounce = debounce
        self.amp = Workspace(options, log=self.log_message)
        self.amp.on_config_error = lambda message: self.show_message(message, "warning")
        self._pending: asyncio.TimerHandle | None = None
        self._dirty: list[str] = []  # documents changed since the last flush, latest last
        self._open_py: set[str] = set()
        self._open_nb: set[str] = set()

    # ---------------------------------------------------------------- messages
    def log_message(self, level: str, message: str) -> None:
        getattr(log, "warning" if level == "warning" else ("error" if level == "error" else "info"))(message)
        try:
            self.window_log_message(types.LogMessageParams(type=_LEVELS.get(level, types.MessageType.Log), message=message))
        except Exception:  # pragma: no cover - no client attached (unit use)
            pass

    def show_message(self, message: str, level: str = "info") -> None:
        try:
            self.window_show_message(types.ShowMessageParams(type=_LEVELS.get(level, types.MessageType.Info), message=message))
        except Exception:  # pragma: no cover
            pass

    # ---------------------------------------------------------------- diagnostics
    def publish(self, uri: str) -> None:
        """Analyse one open document (or notebook) and publish its diagnostics. Never raises."""
        try:
            if uri in self._open_nb:
                nb = self.workspace.get_notebook_document(notebook_uri=uri)
                if nb is None:
                    return
                cells = []
                for c in nb.cells:
                    doc = self.workspace.get_text_document(c.document)
                    python = c.kind == types.NotebookCellKind.Code and (doc.language_id or "python") == "python"
                    cells.append(Cell(c.document, doc.source, python))
                for cell_uri, diags in self.amp.diagnose_notebook(uri, cells).items():
                    version = self.workspace.get_text_document(cell_uri).version
                    self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=diags, version=version))
            elif uri in self._open_py:
                doc = self.workspace.get_text_document(uri)
                diags = self.amp.diagnose(uri, doc.source)
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=doc.version))
        except Exception as exc:  # a bug in amplint: report it, keep serving
            self.log_message("error", f"amplint: internal error while checking {uri}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    def open_documents(self) -> list[str]:
        return sorted(self._open_py) + sorted(self._open_nb)

    def publish_all(self, first: list[str] = ()) -> None:
        """Re-diagnose every open document, those in ``first`` (most recent first) before the rest."""
        order = [u for u in reversed(first) if u in self._open_py or u in self._open_nb]
        order = list(dict.fromkeys(order))
        order += [u for u in self.open_documents() if u not in order]
        for uri in order:
            self.publish(uri)

    def schedule(self, uri: str, delay: float | None = None) -> None:
        """Debounce: re-check ``delay`` seconds after the last change (all changes coalesce)."""
        self._dirty.append(uri)
        if self._pending is not None:
            self._pending.cancel()
        delay = self.debounce if delay is None else delay
        self._pending = asyncio.get_running_loop().call_later(delay, self.flush)

    def flush(self) -> None:
        self._pending = None
        dirty, self._dirty = self._dirty, []
        self.publish_all(dirty)

    def current(self, uri: str) -> bool:
        """Is ``uri`` an open Python document or a cell of an open notebook? A change still
        waiting out the debounce is checked now, so requests see the text as it is."""
        if uri not in self._open_py and _owner(self, uri) not in self._open_nb:
            return False
        if self._pending is not None:
            self._pending.cancel()
            self.flush()
        return True

    def settings_changed(self) -> None:
        self.amp.reload_settings()
        self.log_message("info", "amplint: configuration changed; re-checking open documents")
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self.flush()


def _is_config(uri: str) -> bool:
    return uri.rsplit("/", 1)[-1] == "pyproject.toml"


def _owner(ls: AmplintServer, uri: str) -> str:
    nb = ls.workspace.get_notebook_document(cell_uri=uri)
    return nb.uri if nb is not None else uri


def create_server(options: ServerOptions | None = None, debounce: float = DEFAULT_DEBOUNCE) -> AmplintServer:
    server = AmplintServer(options, debounce)

    @server.feature(types.INITIALIZE)
    def initialize(ls: AmplintServer, params: types.InitializeParams):
        ls.amp.codec = ls.workspace.position_codec
        root = ls.workspace.root_path
        if root and os.path.isdir(root):
            os.chdir(root)  # unsaved buffers and --config paths resolve from the project root

    @server.feature(types.INITIALIZED)
    async def initialized(ls: AmplintServer, params: types.InitializedParams):
        caps = ls.client_capabilities.workspace
        watch = caps and caps.did_change_watched_files
        if watch and watch.dynamic_registration:
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
                    id="amplint-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(
                        watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]),
                )]))
            except Exception as exc:  # the client refused: pyproject.toml saves in the editor still count
                ls.log_message("warning", f"amplint: could not watch pyproject.toml: {exc}")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AmplintServer, params: types.DidOpenTextDocumentParams):
        doc = params.text_document
        if _is_config(doc.uri) or ls.workspace.get_notebook_document(cell_uri=doc.uri) is not None:
            return
        if doc.language_id not in ("python", "") and not doc.uri.endswith((".py", ".pyi")):
            return
        if doc.uri.endswith(".ipynb"):  # a notebook opened as JSON text: positions would not map
            return
        ls._open_py.add(doc.uri)
        ls.publish(doc.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AmplintServer, params: types.DidChangeTextDocumentParams):
        if params.text_document.uri in ls._open_py:  # not pyproject.toml, not other languages
            ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: AmplintServer, params: types.DidSaveTextDocumentParams):
        if _is_config(params.text_document.uri):
            ls.settings_changed()
        elif params.text_document.uri in ls._open_py:
            ls.schedule(params.text_document.uri, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AmplintServer, params: types.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        if uri in ls._open_py:
            ls._open_py.discard(uri)
            ls.amp.forget(uri)
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def nb_open(ls: AmplintServer, params: types.DidOpenNotebookDocumentParams):
        ls._open_nb.add(params.notebook_document.uri)
        ls.publish(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def nb_change(ls: AmplintServer, params: types.DidChangeNotebookDocumentParams):
        ls.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def nb_save(ls: AmplintServer, params: types.DidSaveNotebookDocumentParams):
        ls.schedule(params.notebook_document.uri, delay=0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def nb_close(ls: AmplintServer, params: types.DidCloseNotebookDocumentParams):
        uri = params.notebook_document.uri
        ls._open_nb.discard(uri)
        ls.amp.forget(uri)
        for cell in params.cell_text_documents:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: AmplintServer, params: types.DidChangeWatchedFilesParams):
        if any(_is_config(c.uri) for c in params.changes):
            ls.settings_changed()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=False),
    )
    def code_action(ls: AmplintServer, params: types.CodeActionParams):
        uri = params.text_document.uri
        try:
            if not ls.current(uri):
                return None
            text = None if uri not in ls._open_py else ls.workspace.get_text_document(uri).source
            return ls.amp.code_actions(uri, text, params.range, params.context.only) or None
        except Exception as exc:
            ls.log_message("error", f"amplint: code actions failed for {uri}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            return None

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: AmplintServer, params: types.HoverParams):
        uri = params.text_document.uri
        try:
            if not ls.current(uri):
                return None
            text = None if uri not in ls._open_py else ls.workspace.get_text_document(uri).source
            return ls.amp.hover(uri, text, params.position)
        except Exception as exc:
            ls.log_message("error", f"amplint: hover failed for {uri}: {type(exc).__name__}: {exc}")
            return None

    return server


def serve(options: ServerOptions | None = None, debounce: float = DEFAULT_DEBOUNCE) -> None:
    """Speak LSP on stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="amplint server: %(levelname)s: %(message)s")
    create_server(options, debounce).start_io()
