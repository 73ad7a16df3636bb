"""The HTTP options rule (sans-IO) and the one place that builds HTTP clients."""

from __future__ import annotations

import ast
import pathlib
import ssl

import pytest

import openenv
from openenv._core.options import ClientOptions
from openenv._core.urls import parse_base_url

SRC = pathlib.Path(openenv.__path__[0])


def test_http_settings_one_rule_for_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    options = ClientOptions(headers={"Authorization": "Bearer t0ken"}, connect_timeout=3.0, message_timeout=7.0)
    local = options.http_settings(parse_base_url("http://127.0.0.1:8000"))
    assert (local.trust_env, local.verify, local.connect_timeout, local.read_timeout) == (False, False, 3.0, 7.0)
    assert local.headers == {"Authorization": "Bearer t0ken"} and "t0ken" not in repr(local)
    private = options.http_settings(parse_base_url("http://10.1.2.3:8000"))
    assert private.trust_env is False  # no proxy for private hosts, as the WebSocket (proxy=None)
    remote = options.http_settings(parse_base_url("https://owner-env.hf.space"))
    assert remote.trust_env is True and remote.verify is True  # proxies from the environment; httpx's trust store
    unchecked = ClientOptions(verify=False).http_settings(parse_base_url("https://example.org")).verify
    assert isinstance(unchecked, ssl.SSLContext) and unchecked.verify_mode == ssl.CERT_NONE
    context = ssl.create_default_context()
    assert ClientOptions(verify=context).http_settings(parse_base_url("https://127.0.0.1:1")).verify is context


def test_only_the_http_module_builds_http_clients() -> None:
    builders = sorted(
        {
            str(path.relative_to(SRC))
            for path in SRC.rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute)
            and node.attr in ("Client", "AsyncClient")
            and isinstance(node.value, ast.Name)
            and node.value.id == "httpx"
        }
    )
    assert builders == ["_async/http.py", "_sync/http.py"], builders
