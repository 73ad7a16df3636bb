"""No client secret in a server's log lines, at DEBUG, on every transport (issue 32).

A client's header values (``Authorization``, ``X-Api-Key``) and query values
(``/ws?token=...``) must not reach the log of the embedded server (websockets'
``websockets.server`` lines, both transports) nor of ``serve --asgi``
(uvicorn's ``uvicorn.error`` lines, where websockets-sansio logs every request
header at DEBUG, and its ``uvicorn.access`` lines, which show the path with
its query).
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.sync.client import connect

from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment

SECRETS = ("HSECRET-1", "ASECRET-2", "QSECRET-3")
HEADERS = {"X-Api-Key": "HSECRET-1", "Authorization": "Bearer ASECRET-2"}


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("websockets.server", "uvicorn", "openenv.server")):  # not the test's client
            self.lines.append(f"{record.name}: {record.getMessage()}")


class _Log:
    """Every line of the loggers the servers write to, at DEBUG (uvicorn's do not propagate to the root)."""

    def __init__(self) -> None:
        self.handler = _Lines()
        self._loggers: list[tuple[logging.Logger, int]] = []
        self.listen("")

    @property
    def lines(self) -> list[str]:
        return self.handler.lines

    def listen(self, name: str) -> None:
        """Capture ``name``'s lines at DEBUG (after whatever configured it, as uvicorn's config does)."""
        logger = logging.getLogger(name)
        self._loggers.append((logger, logger.level))
        logger.setLevel(logging.DEBUG)
        if name in ("", "uvicorn"):
            logger.addHandler(self.handler)

    def close(self) -> None:
        for logger, level in self._loggers:
            logger.removeHandler(self.handler)
            logger.setLevel(level)


@pytest.fixture
def server_log() -> Iterator[_Log]:
    log = _Log()
    yield log
    log.close()


def _visit(url: str, ws_url: str) -> None:
    """A session with secrets in its headers and query, and an HTTP request with them."""
    with connect(ws_url + "?token=QSECRET-3", additional_headers=HEADERS) as ws:
        ws.send('{"type": "reset"}')
        assert "observation" in ws.recv(timeout=30)
    request = urllib.request.Request(url + "/health?token=QSECRET-3", headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def _check(lines: list[str], header_lines: str | None) -> None:
    assert any("connection open" in line for line in lines), lines  # the server's DEBUG lines were captured
    if header_lines is not None:
        assert any("token=***" in line for line in lines), lines  # the request targets were logged...
        assert any(f"{header_lines}: <hidden>" in line for line in lines), lines  # ...and the headers
    assert [line for line in lines if any(secret in line for secret in SECRETS)] == []


@pytest.mark.parametrize("transport", ["asyncio", "threads"])
def test_embedded_server_logs_no_header_or_query_value(server_log: _Log, transport: str) -> None:
    server_log.listen("websockets.server")
    with EnvServer(EchoEnvironment, transport=transport) as server:  # type: ignore[arg-type]
        _visit(server.url, server.ws_url)
    _check(server_log.lines, None)  # its own request parser logs no request head: nothing to hide, nothing leaks


def test_serve_asgi_logs_no_header_or_query_value(server_log: _Log, asgi_server_factory: Callable[..., Any]) -> None:
    server = asgi_server_factory(EchoEnvironment, log_level="debug")  # serve --asgi --log-level DEBUG
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        server_log.listen(name)
    _visit(server.url, server.ws_url)
    server.stop()
    _check(server_log.lines, "< x-api-key")
