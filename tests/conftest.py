import pytest

from amplint_testutil import run_amplint


@pytest.fixture
def amplint():
    return run_amplint
