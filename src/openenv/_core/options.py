"""Client options, validated once and shared by ``Env``, ``new_session`` and the providers."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
)

from .errors import (
    ConnectError,
    ConnectTimeout,
    InvalidURL,
    MessageTooLarge,
    OpenEnvError,
    SessionLost,
    error_from_frame,
)
from .frames import describe_close
from .urls import Endpoints, redact_url

__all__ = ["ClientOptions", "EnvOptions", "connect_error", "closed_error", "DEFAULT_MAX_MESSAGE_SIZE"]

DEFAULT_MAX_MESSAGE_SIZE = 100 * 1024 * 1024

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


class _RedactHeaders(logging.Filter):
    """Hide the values of credential headers in websockets' handshake debug lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 2 and str(args[0]).lower() in _SECRET_HEADERS:
            record.args = (args[0], "<hidden>")
        return True


#: The logger our connections use: websockets' own lines, credentials hidden.
WS_LOGGER = logging.getLogger("openenv.websockets")
WS_LOGGER.addFilter(_RedactHeaders())


def _check_timeout(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds or None, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class ClientOptions:
    """Connection options of a client (see ``Env`` for their meaning)."""

    connect_timeout: float | None = 10.0
    message_timeout: float | None = 60.0
    max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    compression: bool | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "message_timeout", "ping_interval", "ping_timeout"):
            object.__setattr__(self, name, _check_timeout(name, getattr(self, name)))
        size = self.max_message_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
            raise ValueError(f"max_message_size must be a positive int (bytes) or None, not {size!r}")
        headers = dict(self.headers or {})
        for key, value in headers.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError("headers must map str to str")
        object.__setattr__(self, "headers", headers)
        if self.compression not in (None, True, False):
            raise ValueError(f"compression must be True, False or None (automatic), not {self.compression!r}")

    def __repr__(self) -> str:
        # headers may carry tokens: show their names only
        return (
            f"ClientOptions(connect_timeout={self.connect_timeout}, message_timeout={self.message_timeout}, "
            f"max_message_size={self.max_message_size}, ping_interval={self.ping_interval}, "
            f"ping_timeout={self.ping_timeout}, headers=<{len(self.headers)} hidden>, "
            f"compression={self.compression})"
        )

    def compress(self, endpoints: Endpoints) -> bool:
        """Whether to negotiate permessage-deflate: off on loopback and private hosts by default."""
        if self.compression is None:
            return not endpoints.is_local
        return self.compression

    def ws_kwargs(self, endpoints: Endpoints) -> dict[str, Any]:
        """Keyword arguments for websockets' ``connect`` (the same on both sides)."""
        kwargs: dict[str, Any] = {
            "open_timeout": self.connect_timeout,
            "max_size": self.max_message_size,
            "ping_interval": self.ping_interval,
            "ping_timeout": self.ping_timeout,
            "compression": "deflate" if self.compress(endpoints) else None,
            "close_timeout": 5.0,
            "user_agent_header": "openenv-twin (websockets)",
            "logger": WS_LOGGER,
        }
        if self.headers:
            kwargs["additional_headers"] = dict(self.headers)
        if endpoints.is_local:
            kwargs["proxy"] = None
        return kwargs


def connect_error(exc: BaseException, endpoints: Endpoints, timeout: float | None) -> OpenEnvError:
    """Our error for an exception raised while opening the WebSocket."""
    url = redact_url(endpoints.ws_url)
    if isinstance(exc, OpenEnvError):
        return exc
    if isinstance(exc, TimeoutError):
        return ConnectTimeout(f"could not open {url} within connect_timeout={timeout} s")
    if isinstance(exc, InvalidURI):
        return InvalidURL(f"invalid WebSocket URL {url}: {exc}")
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
        return ConnectError(f"the server at {url} refused the WebSocket upgrade with HTTP {status}{hint}")
    if isinstance(exc, InvalidHandshake):
        return ConnectError(f"WebSocket handshake with {url} failed: {exc}; is this an OpenEnv server?")
    if isinstance(exc, ConnectionRefusedError):
        return ConnectError(f"connection refused by {url}; is the server running?")
    if isinstance(exc, OSError):
        return ConnectError(f"could not connect to {url}: {exc.strerror or exc}")
    if isinstance(exc, ConnectionClosed):
        return ConnectError(f"the server at {url} closed the connection during the handshake")
    return ConnectError(f"could not connect to {url}: {type(exc).__name__}: {exc}")


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


class EnvOptions(TypedDict, total=False):
    """The connection options of ``Env(...)``, accepted by its other constructors too."""

    connect_timeout: float | None
    message_timeout: float | None
    max_message_size: int | None
    ping_interval: float | None
    ping_timeout: float | None
    headers: Mapping[str, str] | None
    compression: bool | None
    mode: str | None
