"""`amplint server`: amplint as a Language Server (LSP over stdio), for any editor.

Needs the optional extra: ``pip install 'amplint[server]'`` (pygls and lsprotocol). Nothing
here is imported by `amplint check`/`fix`. The engine adapter is
amplint.server.workspace.Workspace; the protocol glue is amplint.server.server.
"""
