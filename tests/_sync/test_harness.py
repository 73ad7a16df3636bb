# GENERATED from tests/_async/test_harness.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``harness_factory`` where OpenEnv 0.10 is not installed (this suite's venv).

Driven by OpenEnv's own harness: ``tests/interop/test_openenv_harness.py``.
"""

from __future__ import annotations

import sys

import pytest

from openenv.sync import harness_factory
from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment


def test_without_openenv_it_says_what_to_install_and_starts_nothing() -> None:
    """No ``openenv.core`` here: a clear ImportError before any server is started or reached."""
    assert "openenv.core" not in sys.modules  # importing openenv.aio / openenv.sync imports no OpenEnv
    with EnvServer(EchoEnvironment) as server:
        with pytest.raises(ImportError, match=r"pip install 'openenv==0\.10\.0'") as caught:
            harness_factory(server.url)
        assert "environment_factory" in str(caught.value)  # what to use instead
        assert server.active_sessions == 0
    with pytest.raises(ImportError, match="openenv.core.harness"):
        harness_factory("http://127.0.0.1:9")  # not even reached
