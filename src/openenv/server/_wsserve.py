"""What the two websockets transports share (`openenv.server._threads`, `openenv.server._aio`).

* the HTTP hooks: `process_request()` (a ``/ws`` upgrade takes its session slot
  before the handshake; any other request is answered from `openenv.server._http`)
  and `body_response()` (a request with a body, which websockets' parser refuses);
* the slot rule of a handshake, the one all three transports keep (the ASGI
  app's is `openenv.server.protocol.EnvProtocol.reserve_slot()` before its
  accept): the upgrade reserves a slot, refused with ``503`` and the
  ``CAPACITY_REACHED`` frame at capacity; the session claims it
  (`claim_slot()`); a handshake that fails gives it back (`handshake_ended()`);
* `payload()`: a reply frame's bytes.

Nothing here keeps state: the transports pass the protocol in.
"""

from __future__ import annotations

import email.utils
import http
import json
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.protocol import OPEN

from . import _http
from ._http import WS_PATH, HttpReply
from ._wscompat import method_of
from .protocol import EnvProtocol

__all__ = [
    "process_request",
    "body_response",
    "claim_slot",
    "handshake_ended",
    "payload",
    "is_upgrade",
]

# ------------------------------------------------------------------ HTTP


def _http_response(status: int, body: bytes, content_type: str) -> Response:
    st = http.HTTPStatus(status)
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
        ]
    )
    return Response(st.value, st.phrase, headers, body)


def _to_response(reply: HttpReply) -> Response:
    response = _http_response(reply.status, reply.body, reply.content_type)
    for name, value in reply.headers:
        response.headers[name] = value
    return response


def is_upgrade(request: Request) -> bool:
    """A WebSocket upgrade request (``GET`` over HTTP/1.1 with ``Upgrade: websocket``)."""
    if method_of(request) != "GET" or getattr(request, "protocol", "HTTP/1.1") != "HTTP/1.1":
        return False  # answered as plain HTTP, the same on every websockets version
    upgrade = request.headers.get("Upgrade", "")
    return "websocket" in upgrade.lower()


def process_request(protocol: EnvProtocol, connection: Any, request: Request) -> Response | None:
    """websockets' handshake hook: accept ``/ws`` upgrades (a slot reserved), answer HTTP requests."""
    path = request.path.split("?", 1)[0]
    if is_upgrade(request):
        if path != WS_PATH:
            return _http_response(403, b"Forbidden", "text/plain; charset=utf-8")
        if not hasattr(type(connection), "slot"):
            return None  # not our connection class: the handler checks capacity
        if not protocol.reserve_slot():
            return _to_response(protocol.capacity_reply())
        connection.slot = True
        return None  # perform the WebSocket handshake
    return _to_response(_http.embedded(protocol, method_of(request), path))


def body_response(request: Request, too_large: bool) -> Response:
    """The answer to an HTTP request that carries a body (this server takes none)."""
    path = request.path.split("?", 1)[0]
    return _to_response(_http.embedded_with_body(method_of(request), path, too_large=too_large))


# ------------------------------------------------------------------ slots


def claim_slot(connection: Any) -> bool:
    """Whether `process_request()` reserved a slot for ``connection``; the caller's from now on."""
    if getattr(connection, "slot", False):
        connection.slot = False
        return True
    return False


def handshake_ended(connection: Any, protocol: EnvProtocol) -> None:
    """After the opening handshake, won or lost: a slot reserved for a handshake that failed is given back."""
    if connection.slot and connection.protocol.state is not OPEN:
        connection.slot = False
        protocol.release_slot()


# ------------------------------------------------------------------ frames


def payload(frame: str) -> bytes:
    """A reply frame's UTF-8 bytes (lone surrogates from the client's JSON re-encoded as ASCII escapes)."""
    try:
        return frame.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(json.loads(frame), separators=(",", ":"), allow_nan=False).encode("ascii")
