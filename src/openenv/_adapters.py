"""Adapters between the IO libraries (websockets, httpx) and our errors and logs.

``openenv._core`` imports no IO library: translating their exceptions lives
here, beside the code that makes connections.  httpx is imported only inside
the functions that need it (``import openenv.sync`` stays without httpx).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from ._core.errors import (
    ConnectError,
    ConnectTimeout,
    EnvTimeout,
    InvalidURL,
    MessageTooLarge,
    OpenEnvError,
    SessionLost,
    error_from_frame,
)
from ._core.frames import describe_close
from ._core.options import WS_LOGGER, ClientOptions, DropCloseRace, RedactHeaders, redact_logger, tls_hint
from ._core.urls import Endpoints, redact_url, scrub

if TYPE_CHECKING:
    import logging

__all__ = ["connect_kwargs", "ws_logger", "http_logger", "connect_error", "closed_error", "http_error", "httpx_error"]


def ws_logger() -> logging.Logger:
    """The logger of our WebSocket connections, with its credential filter installed (once)."""
    if not any(isinstance(f, RedactHeaders) for f in WS_LOGGER.filters):
        WS_LOGGER.addFilter(RedactHeaders())
    if not any(isinstance(f, DropCloseRace) for f in WS_LOGGER.filters):
        WS_LOGGER.addFilter(DropCloseRace())
    return WS_LOGGER


def http_logger() -> logging.Logger:
    """httpx's logger, with a filter that hides URL credentials and query values in its lines (added once)."""
    import logging

    return redact_logger(logging.getLogger("httpx"))


def connect_kwargs(options: ClientOptions, endpoints: Endpoints) -> dict[str, Any]:
    """websockets' ``connect`` arguments for ``options``; makes sure its log lines hide credentials."""
    ws_logger()
    return options.ws_kwargs(endpoints)


def http_error(exc: BaseException, url: str, options: ClientOptions) -> Exception:
    """Our error for an httpx failure, with header values scrubbed from the library's text."""
    import httpx

    shown = redact_url(url)
    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return ConnectError(tls_hint(shown, exc))
    error = httpx_error(exc, shown)
    text = str(error)
    clean = scrub(text, options.secrets(url))
    return error if clean == text else type(error)(clean)


def httpx_error(exc: BaseException, url: str) -> Exception:
    """Our error for an httpx exception raised by ``POST /mcp`` or ``GET /schema``."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return EnvTimeout(f"no answer from {url} in time ({type(exc).__name__})")
    if isinstance(exc, httpx.RemoteProtocolError):
        return ConnectError(
            f"{url} dropped the request without an HTTP answer ({exc}); the embedded openenv.server "
            "EnvServer cannot take POST requests with a body, so production mode (POST /mcp) does not "
            "work against it: use mode='simulation', or serve the environment with "
            "openenv.server.asgi.create_app (`python -m openenv serve --asgi`)"
        )
    if isinstance(exc, httpx.ConnectError):
        causes = _causes(exc)
        if any(isinstance(c, ConnectionRefusedError) for c in causes):
            return ConnectError(f"connection refused by {url}; is the server running?")
        tls = [c for c in causes if isinstance(c, ssl.SSLError) and not isinstance(c, ssl.SSLCertVerificationError)]
        if tls:
            return ConnectError(_tls_failed(url, str(tls[0].reason or tls[0])))
    return ConnectError(f"HTTP request to {url} failed: {type(exc).__name__}: {exc}")


def _causes(exc: BaseException) -> list[BaseException]:
    """The chain under an httpx error (httpx → httpcore → anyio's or the socket's errors), a few deep."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _tls_failed(url: str, reason: str) -> str:
    """A TLS handshake that failed before any certificate check: most often a plain-HTTP server."""
    return (
        f"TLS handshake with {url} failed ({reason}); if the server speaks plain HTTP "
        "(python -m openenv serve does), use an http:// URL"
    )


def connect_error(
    exc: BaseException, endpoints: Endpoints, timeout: float | None, secrets: Iterable[str] = ()
) -> OpenEnvError:
    """Our error for an exception raised while opening the WebSocket (header values scrubbed)."""
    error = _connect_error(exc, endpoints, timeout)
    text = str(error)
    clean = scrub(text, secrets)
    if clean != text and type(error) in (ConnectError, ConnectTimeout, InvalidURL):
        scrubbed = type(error)(clean)
        if isinstance(error, ConnectError) and isinstance(scrubbed, ConnectError):
            scrubbed.status = error.status
        return scrubbed
    return error


def _connect_error(exc: BaseException, endpoints: Endpoints, timeout: float | None) -> OpenEnvError:
    url = redact_url(endpoints.ws_url)
    if isinstance(exc, OpenEnvError):
        return exc
    if isinstance(exc, TimeoutError):
        return ConnectTimeout(f"could not open {url} within connect_timeout={timeout} s")
    if isinstance(exc, InvalidURI):
        return InvalidURL(f"invalid WebSocket URL {url}")
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        refusal = _error_in_body(exc.response.body)
        if refusal is not None:  # the server said why, in the protocol's terms (CAPACITY_REACHED, ...)
            return refusal
        hint = (
            "; is this an OpenEnv server? (its WebSocket endpoint is /ws under the base URL)"
            if status in (400, 403, 404)
            else ""
        )
        if status in (401, 403) and not hint:
            hint = "; check the Authorization header"
        detail = _detail_in_body(exc.response.body)
        if detail:  # an overloaded EnvServer: "Too many pending connections: ...; retry later"
            hint = f" ({detail}){hint}"
        refused = ConnectError(f"the server at {url} refused the WebSocket upgrade with HTTP {status}{hint}")
        refused.status = status
        return refused
    if isinstance(exc, InvalidHandshake):
        dropped = _dropped_in_handshake(exc)
        if dropped is not None:  # no HTTP answer at all: a server that is overloaded or going away, not a stranger
            return ConnectError(
                f"the server at {url} closed the connection before answering the WebSocket upgrade ({dropped}); "
                "it may be overloaded (too many connections opening at once) or restarting: retry later"
            )
        return ConnectError(f"WebSocket handshake with {url} failed: {exc}; is this an OpenEnv server?")
    if isinstance(exc, ConnectionRefusedError):
        return ConnectError(f"connection refused by {url}; is the server running?")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConnectError(tls_hint(url, exc))
    if isinstance(exc, ssl.SSLError):
        return ConnectError(_tls_failed(url, str(exc.reason or exc)))
    if isinstance(exc, ConnectionResetError) and url.startswith("wss://"):
        # asyncio's TLS handshake with a plain-HTTP server ends so: a bare reset, no SSL error
        return ConnectError(_tls_failed(url, "the connection was reset"))
    if isinstance(exc, OSError):
        return ConnectError(f"could not connect to {url}: {exc.strerror or exc}")
    if isinstance(exc, ConnectionClosed):
        return ConnectError(f"the server at {url} closed the connection during the handshake")
    return ConnectError(f"could not connect to {url}: {type(exc).__name__}: {exc}")


def _dropped_in_handshake(exc: BaseException) -> str | None:
    """What ended a handshake that got no HTTP answer (an EOF, a reset), or ``None`` for any other failure."""
    for cause in _causes(exc)[1:]:
        if isinstance(cause, EOFError):
            return "end of stream"
        if isinstance(cause, ConnectionError):
            return type(cause).__name__
    return None


def _error_in_body(body: bytes | bytearray | None) -> OpenEnvError | None:
    """The protocol error carried by a refused upgrade's body (``{"type":"error","data":{...}}``), if any."""
    if not body or len(body) > 65536:
        return None
    try:
        frame = json.loads(bytes(body))
    except ValueError:  # not JSON (UnicodeDecodeError is a ValueError too)
        return None
    if type(frame) is not dict or frame.get("type") != "error" or type(frame.get("data")) is not dict:
        return None
    if not isinstance(frame["data"].get("code"), str):
        return None
    return error_from_frame(frame["data"])


def _detail_in_body(body: bytes | bytearray | None) -> str | None:
    """The short ``detail`` text of a refused upgrade's JSON body (``{"detail": "..."}``), if any."""
    if not body or len(body) > 4096:
        return None
    try:
        payload = json.loads(bytes(body))
    except ValueError:
        return None
    detail = payload.get("detail") if type(payload) is dict else None
    return detail[:200] if isinstance(detail, str) and detail.isprintable() else None


def closed_error(exc: ConnectionClosed, what: str, max_size: int | None, episode: bool) -> OpenEnvError:
    """Our error for a connection that closed during a request."""
    sent, rcvd = exc.sent, exc.rcvd
    if rcvd is not None and sent is not None and exc.rcvd_then_sent:
        sent = None  # we only echoed the server's close frame
    if sent is not None and sent.code == 1009:
        return MessageTooLarge(
            f"the server sent a message larger than max_message_size={max_size} bytes during {what}; "
            "the connection was closed. Pass a larger max_message_size to Env(...)"
        )
    if rcvd is not None and rcvd.code == 1009:
        return MessageTooLarge(
            f"the server refused our {what} message as too large ({describe_close(rcvd.code, rcvd.reason)}); "
            "send a smaller action or raise the server's limit"
        )
    code = rcvd.code if rcvd is not None else None
    reason = rcvd.reason if rcvd is not None else ""
    tail = (
        "the episode on the server is lost; call reset() to start a new one"
        if episode
        else "no episode was in progress"
    )
    return SessionLost(f"the connection closed during {what} ({describe_close(code, reason)}); {tail}")
