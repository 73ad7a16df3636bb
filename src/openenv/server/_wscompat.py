"""Every private or version-dependent websockets attribute the embedded server touches, in one place.

websockets documents its servers' hooks (``process_request``,
``create_connection``) but not the parts of the sans-I/O ``ServerProtocol``
that [`EnvServer`][openenv.server.EnvServer] relies on to answer HTTP requests
that carry a body (websockets refuses them). This module holds those, and the
differences between websockets 15, 16 and 17 that the transports must bridge;
``tests/test_websockets_internals.py`` checks each one on every leg of the
support matrix, so a release that moves one fails there, not in production.

* ``ServerProtocol.parser`` (a generator) and ``.reader`` (``StreamReader``),
  replaced by `install_request_parser()`;
* ``Request.method``/``.protocol`` (fields on 17; set as attributes before);
* the threading ``Server.shutdown(close_connections=...)`` (17; before, it
  only stops accepting), and ``ServerConnection.close_socket()`` (`drop()`),
  which the threading transport's ``stop()`` (`openenv.server._threads`) uses
  on websockets < 17 for connections still in their opening handshake.

The asyncio transport (`openenv.server._aio`) subclasses websockets'
asyncio ``ServerConnection`` through documented hooks only (``create_connection``,
the asyncio ``Protocol`` callbacks, ``handshake``, ``transport``); it closes
open sessions itself, because websockets 15's ``Server.close`` cannot send
``1012``.

The client shims (``openenv._shim_async``, ``openenv._shim_sync``) read a few
websockets internals too: the receive buffer (``recv_messages.frames`` and
``.closed``: ``ws_pending``, ``ws_wait_any``), the asyncio transport's ``_sock``
(``ws_abandon``'s last resort), and on the sync side ``close_socket()``,
``send_data()``, ``recv_events_thread`` and ``protocol.handshake_exc`` (its
``_Connection`` fixes).  They stay in the shims, since the client must not
import the server, and ``tests/test_websockets_internals.py`` guards them as it
guards this module.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Generator
from typing import Any

from websockets.datastructures import Headers
from websockets.exceptions import InvalidMessage, SecurityError
from websockets.http11 import Request, Response
from websockets.protocol import Protocol
from websockets.server import ServerProtocol
from websockets.sync.server import Server, ServerConnection

from openenv._core.options import redact_logger

__all__ = [
    "BodyResponse",
    "install_request_parser",
    "method_of",
    "SYNC_SHUTDOWN_CLOSES",
    "DRAIN_LIMIT",
    "drop",
    "server_logger",
    "read_after_fail",
    "handler_tasks",
]

#: Makes the answer to a request with a body: ``(request, too_large) -> Response``.
BodyResponse = Callable[[Request, bool], Response]

#: Request bodies up to this size are read and discarded before the answer is
#: sent (so the client reads the answer, not a connection reset); larger ones
#: get ``413`` at once.
DRAIN_LIMIT = 64 * 1024

#: websockets 17's ``Server.shutdown`` closes open connections and waits for them; before, it only
#: closed the listening socket (then ``ThreadsTransport.stop()`` does the rest itself).
SYNC_SHUTDOWN_CLOSES = "close_connections" in inspect.signature(Server.shutdown).parameters


def server_logger() -> logging.Logger:
    """websockets' server logger (``websockets.server``), given to both transports' ``serve``.

    With a `RedactSecrets` filter: its DEBUG handshake lines show neither a
    client's header values (``< authorization: <hidden>``) nor query values
    (``< GET /ws?token=*** HTTP/1.1``).
    """
    return redact_logger(logging.getLogger("websockets.server"))


def read_after_fail(connection: Any) -> None:
    """Make a connection read again once its protocol fails (``too many fragments``, bad UTF-8).

    websockets' connections stop reading while their message queue is full, as
    it is after thousands of fragments; when ``recv()`` then fails the
    connection (``1009 too many fragments``) it waits for the client to close,
    with reading still paused, so it never sees the client's close and holds
    the session (and its slot) for ``close_timeout`` (10 s).  After a failure
    nothing more is queued (the parser discards), so reading resumes: the
    asyncio transport's ``resume_reading()``, or the threading connection's
    assembler resumed as its own ``close()`` does (under its mutex).
    """
    protocol = connection.protocol
    fail = protocol.fail

    def fail_then_read(*args: Any, **kwargs: Any) -> None:
        # looked up now: the asyncio connection makes its assembler only once connected
        assembler: Any = getattr(connection, "recv_messages", None)
        if assembler is not None and hasattr(assembler, "pause"):
            _never_pause_again(assembler)
        fail(*args, **kwargs)
        transport = getattr(connection, "transport", None)
        if transport is not None:  # asyncio
            if not transport.is_closing():
                transport.resume_reading()
            return
        mutex = getattr(assembler, "mutex", None)
        if assembler is None or mutex is None or not hasattr(assembler, "paused"):
            return
        with mutex:
            if assembler.paused:
                assembler.paused = False
                assembler.resume()

    protocol.fail = fail_then_read


def _never_pause_again(assembler: Any) -> None:
    """Make a failed connection's assembler never pause reading again.

    A reader puts every frame of the chunk it read (the threading connection's reader thread, the
    asyncio protocol's ``data_received``), and the frames parsed before the failure may pause
    reading again after `read_after_fail` resumed it: nobody resumes it then (a CI run held a slot
    for the whole ``close_timeout`` so).  websockets' ``maybe_pause()`` sets ``paused`` and then calls
    ``pause()`` (under the assembler's mutex where it has one); this ``pause`` clears ``paused`` again
    and pauses nothing, so ``maybe_resume()`` and ``close()`` have nothing to undo.
    """

    def pause_nothing() -> None:
        assembler.paused = False

    assembler.pause = pause_nothing


def handler_tasks(server: Any) -> list[Any]:
    """The connection handler tasks of an asyncio ``websockets.asyncio.server.Server``.

    websockets 17 keeps them in ``Server.handler_tasks`` (a set); before, in
    ``Server.handlers`` (a dict: connection -> task).
    """
    tasks = getattr(server, "handler_tasks", None)
    if tasks is None:
        tasks = server.handlers.values()
    return list(tasks)


def drop(connection: ServerConnection) -> None:
    """Close a threading-server connection's socket at once, without a closing handshake."""
    connection.close_socket()


def method_of(request: Request) -> str:
    """The request method (websockets < 17 has no ``Request.method``; our parser sets it, else ``GET``)."""
    return getattr(request, "method", "GET")


def install_request_parser(protocol: ServerProtocol, body_response: BodyResponse) -> None:
    """Replace the protocol's request parser by one that answers requests with a body."""
    if not isinstance(getattr(protocol, "parser", None), Generator) or not hasattr(protocol, "reader"):
        return  # another websockets layout: keep its parser (bodies are dropped, as documented)
    protocol.parser = _parse_request(protocol, body_response)
    next(protocol.parser)


#: websockets 17 parses any method and HTTP/1.0 into ``Request.method``/``.protocol``; 15 and 16
#: refuse anything but ``GET ... HTTP/1.1`` and have neither attribute.
_REQUEST_HAS_METHOD = "method" in {field.name for field in dataclasses.fields(Request)}


def _parse_request(protocol: ServerProtocol, body_response: BodyResponse) -> Generator[None, None, None]:
    """``ServerProtocol.parse`` with one change: a request with a body gets an HTTP answer.

    On websockets < 17 the request line is handed to ``Request.parse`` as
    ``GET <path> HTTP/1.1`` and the real method and protocol are set on the
    parsed request afterwards, so every version answers ``POST /reset`` and
    ``GET /health HTTP/1.0`` alike.
    """
    lines: list[bytes] = []
    request_line: list[str] = []  # [method, protocol] as sent, when rewritten

    def read_line(*args: Any) -> Generator[None, None, bytes | bytearray]:
        line = yield from protocol.reader.read_line(*args)
        lines.append(bytes(line))
        if len(lines) == 1 and not _REQUEST_HAS_METHOD:
            parts = bytes(line).rstrip(b"\r\n").split(b" ", 2)
            if len(parts) == 3 and parts[2] in (b"HTTP/1.1", b"HTTP/1.0"):
                try:
                    request_line[:] = [parts[0].decode("ascii"), parts[2].decode("ascii")]
                except UnicodeDecodeError:
                    return line  # websockets refuses it as not HTTP
                return b"GET " + parts[1] + b" HTTP/1.1\r\n"
        return line

    try:
        request = yield from Request.parse(read_line)
    except SecurityError as exc:  # request line or headers too long, too many headers
        protocol.handshake_exc = exc
        status = 431 if lines else 414  # no line read: the request line itself was too long
        protocol.send_response(protocol.reject(status, f"Failed to open a WebSocket connection: {exc}.\n"))
        yield
    except Exception as exc:
        body = _body_request(lines, exc)
        if body is None:  # not HTTP: drop it, as websockets does
            protocol.handshake_exc = InvalidMessage("did not receive a valid HTTP request")
            protocol.handshake_exc.__cause__ = exc
            protocol.send_eof()
            protocol.parser = protocol.discard()
            next(protocol.parser)
            yield
        else:
            request, length = body
            protocol.handshake_exc = InvalidMessage(f"HTTP {method_of(request)} request with a body")
            if length is not None and length <= DRAIN_LIMIT:
                yield from protocol.reader.read_exact(length)  # read it, so that closing sends FIN, not RST
                response = body_response(request, False)
            else:
                response = body_response(request, True)
            protocol.send_response(response)
            yield
    if request_line:
        request.method, request.protocol = request_line
    protocol.events.append(request)
    yield from Protocol.parse(protocol)


def _body_request(lines: list[bytes], exc: Exception) -> tuple[Request, int | None] | None:
    """(request, body length or ``None`` if unknown) when ``exc`` refused a request body."""
    if not isinstance(exc, (ValueError, NotImplementedError)) or len(lines) < 2 or lines[-1].strip():
        return None  # the headers were not read to their end: not a body refusal
    try:
        method, path, _ = lines[0].decode("ascii").split(" ", 2)
        headers = Headers()
        for raw in lines[1:-1]:
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip()] = value.strip()
    except (UnicodeDecodeError, ValueError):
        return None
    length: int | None = None
    if "Transfer-Encoding" not in headers:
        try:
            length = max(int(v) for v in headers.get_all("Content-Length"))
        except ValueError:
            return None
        if length < 0:
            return None
    request = Request(path, headers)
    request.method = method  # a field on websockets >= 17, an attribute before
    return request, length
