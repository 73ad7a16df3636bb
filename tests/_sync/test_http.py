# GENERATED from tests/_async/test_http.py by scripts/run_unasync.py -- DO NOT EDIT.
"""One HTTP client builder: every HTTP path honours verify=, headers and timeouts, and fails loudly."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from openenv._sync.http import get_json
from openenv._core.options import ClientOptions
from openenv.sync import ConnectError, ProtocolError, environment_factory


@pytest.mark.parametrize("trust", ["ca", "off"])
def test_environment_factory_over_tls_with_a_private_ca(tls_server: Any, tls_files: Any, trust: str) -> None:
    verify: Any = tls_files.ca if trust == "ca" else False
    cls = environment_factory(tls_server.url, verify=verify)
    try:
        # the real step signature from GET /schema (over https, with verify=), not a default step()
        params = inspect.signature(cls.step).parameters
        assert "delta" in params and "size" in params, params
        env = cls()
        env.reset()
        assert "2" in env.step(delta=2)  # the step reached the server over wss
        env.close()
    finally:
        cls.close()


def test_environment_factory_without_verify_raises_instead_of_a_default_class(tls_server: Any) -> None:
    with pytest.raises(ConnectError, match="certificate verification failed.*verify="):
        environment_factory(tls_server.url)


def test_get_json_raises_a_clear_error_never_none(tls_server: Any, tls_files: Any, free_port: int) -> None:
    with pytest.raises(ConnectError, match="certificate verification failed.*verify="):
        get_json(tls_server.url, "/schema", ClientOptions())
    schema = get_json(tls_server.url, "/schema", ClientOptions(verify=tls_files.ca))
    assert "delta" in schema["action"]["properties"]
    with pytest.raises(ProtocolError, match="HTTP 404"):
        get_json(tls_server.url, "/no-such-endpoint", ClientOptions(verify=tls_files.ca))
    assert get_json(tls_server.url, "/no-such-endpoint", ClientOptions(verify=False), optional=True) is None
    with pytest.raises(ConnectError, match=f"127.0.0.1:{free_port}"):
        get_json(f"http://127.0.0.1:{free_port}", "/schema", ClientOptions())
