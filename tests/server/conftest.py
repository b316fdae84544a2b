import pytest

# The server is an optional extra (amplint[server]); the `test` extra installs it.
pytest.importorskip("pygls")
pytest.importorskip("pytest_lsp")
