"""`amplint server`: amplint as a Language Server (LSP over stdio), for any editor.

Needs the optional extra ``server`` (pygls and lsprotocol): ``pip install '.[server]'`` in a clone. Nothing
here is imported by `amplint check`/`fix`. The engine adapter is
amplint.server.workspace.Workspace; the protocol glue is amplint.server.server.
"""
