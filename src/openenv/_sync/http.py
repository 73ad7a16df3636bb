# GENERATED from src/openenv/_async/http.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The one HTTP client builder: ``GET /schema``, ``/metadata``, ``/health`` and ``POST /mcp``.

Every HTTP request this library makes goes through `http_client()`, so every
option applies the same way on every path (the rules live in
[`ClientOptions.http_settings()`][openenv._core.options.ClientOptions.http_settings]):
``verify``, the client's headers, ``connect_timeout`` / ``message_timeout``,
and proxies from the environment for remote hosts only.  A failed request
raises an [`OpenEnvError`][openenv.sync.OpenEnvError] that says what to do
(a certificate from a private CA names ``verify=``), never returns ``None``.

httpx is imported lazily: ``import openenv.sync`` does not need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._adapters import http_error, http_logger
from .._core import mcp
from .._core.options import ClientOptions
from .._core.urls import Endpoints, parse_base_url, redact_url

if TYPE_CHECKING:
    import httpx

__all__ = ["http_client", "get_json"]


def http_client(endpoints: Endpoints, options: ClientOptions) -> httpx.Client:
    """An httpx client for the server at ``endpoints``, configured from ``options``."""
    import httpx  # lazily: only schemas, health checks and production MCP need it

    settings = options.http_settings(endpoints)
    http_logger()  # httpx's "HTTP Request: GET <url>" line: no credentials, no query values
    return httpx.Client(
        trust_env=settings.trust_env,
        headers=settings.headers,
        verify=settings.verify,
        timeout=httpx.Timeout(settings.read_timeout, connect=settings.connect_timeout),
    )


def get_json(base_url: str, path: str, options: ClientOptions, *, optional: bool = False) -> Any:
    """``GET <base_url><path>`` as JSON.

    Args:
        base_url: the server's base URL.
        path: the endpoint, such as ``"/schema"``.
        options: the client's options (``verify``, headers, timeouts).
        optional: return ``None`` when the server answers 404 (an endpoint it
            does not publish) instead of raising.

    Raises:
        ConnectError: the request failed (refused, TLS verification, ...).
        EnvTimeout: no answer within the options' timeouts.
        ProtocolError: an HTTP error status, or a body that is not JSON.
    """
    import httpx  # lazily: only schemas, health checks and production MCP need it

    endpoints = parse_base_url(base_url)
    url = endpoints.http(path)
    try:
        with http_client(endpoints, options) as http:
            response = http.get(url)
    except httpx.HTTPError as exc:
        raise http_error(exc, url, options) from None
    if optional and response.status_code == 404:
        return None
    return mcp.http_json(response.status_code, response.content, redact_url(url), options.secrets(base_url))
