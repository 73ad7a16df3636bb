"""A small OpenEnv-protocol server built on websockets (its asyncio server by default).

[`EnvServer`][openenv.server.EnvServer] serves one environment factory on one port, speaking the
OpenEnv wire protocol as the released servers do (``openenv`` 0.10.0 and
``openenv-core`` 0.3.0): the same frames, error codes, error messages and
step-result shape (0.10 flavour: ``metadata`` stays inside the observation and
is copied to the top level only when it is non-empty). It needs no Docker, no
ASGI stack and no network access, which makes it the project's embedded
default and the real server the client tests talk to.

What it serves
--------------

* ``/ws`` (WebSocket, exact path; the query string is ignored): one environment
  instance per connection, created by the factory after a capacity slot has
  been reserved. Frames ``reset``, ``step``, ``state``, ``close`` and ``mcp``
  (JSON-RPC ``tools/list``/``tools/call`` for environments with
  [`tool()`][openenv.server.tool] methods, see `openenv.server.tools`;
  ``-32603 Environment does not support MCP`` for the others). One reply per request, in order.
  On the default asyncio transport (`openenv.server._aio`) every connection is
  a task on one event loop; an environment that does not block (``blocking =
  False``, or ``async`` methods) runs on that loop, a blocking one on a worker
  thread of its own per session, so a slow ``step`` blocks only its session
  while keepalive pings are still answered. ``transport="threads"`` runs each
  connection in websockets' own threads instead.
* HTTP ``GET /health``, ``/metadata``, ``/schema`` and ``/state`` (stateless:
  each ``/state`` call creates, reads and closes a fresh instance), answered
  from websockets' ``process_request`` hook with JSON bodies.

Differences from the reference server
-------------------------------------

* **No HTTP POST endpoints** (``/reset``, ``/step``, ``/mcp``): they answer
  ``501`` with a message pointing at ``/ws`` (which is all the reference
  clients use anyway), with or without a request body. websockets' HTTP parser
  refuses bodies, so the server reads the request line and headers itself:
  a body of up to 64 KiB is read and discarded before the answer (so the client
  reads it rather than a connection reset); a larger or chunked body gets
  ``413`` at once and the connection is closed.
* Other non-``GET`` methods on the ``GET`` routes give ``405``, unknown paths
  ``404 {"detail":"Not Found"}``; a plain (non-upgrade) ``GET /ws`` gives
  ``404`` like the reference; a WebSocket upgrade to any path other than
  ``/ws`` is refused with ``403``.
* A frame that is valid JSON but not an object gets a ``VALIDATION_ERROR``
  (``dict_type``) and the session continues (the reference fails the session
  with a ``SESSION_ERROR``).
* ``/ws?session_id=`` (MCP session attach), WebSocket ``/mcp``, the task API
  and the web interface are not implemented.
* [`EnvServer.stop()`][openenv.server.EnvServer.stop] closes open sessions with code ``1012`` (service
  restart), as uvicorn does on shutdown.
* **Capacity is checked before the WebSocket handshake**: at capacity, an
  upgrade to ``/ws`` is refused with HTTP ``503`` (``Retry-After: 1``) whose
  JSON body is the protocol's error frame (``{"type":"error","data":{"code":
  "CAPACITY_REACHED","active_sessions":..,"max_sessions":..}}``); this
  project's clients raise [`CapacityReached`][openenv.sync.CapacityReached] from it. (The
  reference server completes the handshake, then sends that frame and closes;
  released clients see a refused handshake instead.) The slot is reserved in
  the handshake and given back if the handshake then fails.
* **Idle sessions are closed**: a session whose client sends no message for
  ``idle_timeout`` seconds (default 300; ``None``: never) is closed with code
  ``1001`` and reason ``"idle timeout: no message for N s"``, freeing its slot.
  Keepalive pings do not count; a long ``step`` is not idleness.
* **Pending connections are capped**: each accepted TCP connection costs a
  socket (and two threads on the threading transport) until its handshake (or
  HTTP request) completes, within ``handshake_timeout`` (10 s). Beyond
  ``max_pending`` (64, or twice ``max_sessions`` if larger) such connections,
  new ones are answered ``503`` and closed, after skipping the request's headers
  (up to 8 KiB, within 3 s) on every transport, so that the client reads the
  503 rather than a reset. A flood of slow connections cannot exhaust
  threads or descriptors. Open sessions are bounded by ``max_sessions``.
* **Strict JSON out**: every frame and HTTP body is RFC 8259 JSON. An
  observation or state holding ``NaN``/``Infinity`` gives an
  ``EXECUTION_ERROR`` (the session goes on); error details that echo such input
  carry ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` as strings.

Inbound messages larger than ``max_message_size`` (16 MiB by default, like
uvicorn) make websockets close the connection with code ``1009``.
"""

from __future__ import annotations

import email.utils
import http
import json
import logging
import os
import signal
import socket
import ssl as _ssl
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Literal

from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import CONNECTING, OPEN
from websockets.server import ServerProtocol
from websockets.sync.server import Server, ServerConnection
from websockets.sync.server import serve as _ws_serve

from . import _http
from ._aio import _REFUSED_LINGER, _REFUSED_SKIP, AsyncioTransport
from ._aio import OVERLOADED as _OVERLOADED
from ._http import WS_PATH as _WS_PATH
from ._http import HttpReply
from ._wire import step_result
from ._wscompat import (
    SYNC_SHUTDOWN_CLOSES,
    drop,
    install_request_parser,
    method_of,
    read_after_fail,
    server_logger,
)
from .protocol import EnvFactory, EnvProtocol, Session

__all__ = [
    "EnvServer",
    "serve",
    "step_result",
    "EnvFactory",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_BACKLOG",
    "Transport",
]

logger = logging.getLogger("openenv.server")

#: Largest inbound WebSocket message accepted by default (uvicorn's ``ws_max_size``).
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

#: Seconds without a client message after which a ``/ws`` session is closed.
DEFAULT_IDLE_TIMEOUT = 300.0

#: Connections whose handshake or HTTP request is still in progress, at most: this, or twice
#: ``max_sessions`` when that is larger (so a pool can open every session at once).
DEFAULT_MAX_PENDING = 64

#: ``"asyncio"`` (the default: one event loop, no thread per connection) or ``"threads"``
#: (websockets' threading server: a thread per connection).
Transport = Literal["asyncio", "threads"]

_TRANSPORTS = ("asyncio", "threads")

#: The listening socket's backlog: connections the kernel holds until they are accepted (uvicorn's default).
#: A burst of connects beyond it waits for a SYN retransmit (1 s, then 3 s, ...).  The kernel caps it at
#: ``net.core.somaxconn`` (4096 on Linux 5.4+).
DEFAULT_BACKLOG = 2048

#: Seconds a connection has to send its request and finish the handshake (websockets' ``open_timeout``).
DEFAULT_HANDSHAKE_TIMEOUT = 10.0

# ------------------------------ HTTP answers ------------------------------ #


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


def _is_upgrade(request: Request) -> bool:
    """A WebSocket upgrade request (``GET`` over HTTP/1.1 with ``Upgrade: websocket``)."""
    if method_of(request) != "GET" or getattr(request, "protocol", "HTTP/1.1") != "HTTP/1.1":
        return False  # answered as plain HTTP, the same on every websockets version
    upgrade = request.headers.get("Upgrade", "")
    return "websocket" in upgrade.lower()


# ----------------------------- connections ---------------------------------- #
#
# websockets' threading server starts two threads (the handler's and the
# connection's reader) and holds the socket for every accepted TCP
# connection until its opening handshake completes or ``open_timeout``
# passes. ``_Connection`` counts those pending handshakes and refuses
# connections beyond ``max_pending`` at once (a raw ``503`` and a close), so a
# flood of idle or slow TCP connections cannot exhaust threads or descriptors.
# It also reads HTTP requests itself, so that a request with a body (``POST
# /reset`` ...) is answered (``405``/``501``/``413``) instead of dropped.


class _Refused(Exception):
    """Raised from ``_Connection.__init__`` to make websockets drop a connection."""


def _make_connection_class(owner: EnvServer) -> type[ServerConnection]:
    """A ``ServerConnection`` subclass bound to ``owner`` (websockets' ``create_connection``)."""

    class _Connection(ServerConnection):
        #: Whether this connection holds a reserved session slot (set by ``process_request``).
        slot = False

        # websockets 17 passes the server as a third argument; 15 and 16 do not.
        def __init__(self, sock: socket.socket, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
            if not owner._enter_pending():
                _refuse_now(sock)
                raise _Refused
            try:
                install_request_parser(protocol, owner._body_response)
                super().__init__(sock, protocol, *args, **kwargs)
                read_after_fail(self)
            except BaseException:
                owner._leave_pending()
                raise
            owner._track(self)

        def handshake(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().handshake(*args, **kwargs)
            finally:
                owner._leave_pending()
                if self.slot and self.protocol.state is not OPEN:  # reserved, then the handshake failed
                    self.slot = False
                    owner._protocol.release_slot()

    return _Connection


def _refuse_now(sock: socket.socket) -> None:
    """Skip the request head, answer ``503`` with a half-close, and wait a moment for the client's EOF.

    As the asyncio transport refuses (`openenv.server._aio`): a socket closed
    with the client's request unread ends in a reset, which the client may
    read before the 503 ("closed the connection during the handshake", which a
    pool does not retry).  In the connection's own thread, each step bounded by
    the linger (3 s); the caller closes the socket.
    """
    deadline = time.monotonic() + _REFUSED_LINGER
    try:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < _REFUSED_SKIP:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(4096)
            if not chunk:
                break
            head = (head + chunk)[-_REFUSED_SKIP:]
        sock.settimeout(_REFUSED_LINGER)
        sock.sendall(_OVERLOADED)
        sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + _REFUSED_LINGER
        while time.monotonic() < end:  # the client reads the answer, then closes: its EOF
            sock.settimeout(max(end - time.monotonic(), 0.001))
            if not sock.recv(4096):
                break
    except OSError:  # a timeout, a reset: the client is gone or too slow
        pass


# --------------------------------- server ---------------------------------- #


class EnvServer:
    """An OpenEnv-protocol server for one environment factory.

    Use it as a context manager, which starts and stops it:

    ```python
    from openenv.server import EnvServer
    from openenv.server.echo import EchoEnvironment

    with EnvServer(EchoEnvironment) as srv:
        print(srv.url)   # http://127.0.0.1:<ephemeral port>
    ```

    Args:
        factory: an [`Environment`][openenv.server.Environment] subclass, or a zero-argument callable
            returning an environment. It is called once per ``/ws`` session
            (after a capacity slot was reserved) and once per ``GET /state``.
        host: interface to bind; keep the default ``127.0.0.1`` unless you
            mean to expose the server.
        port: TCP port; ``0`` picks a free ephemeral port, known as
            `port` after `start()`.
        max_sessions: the number of concurrent ``/ws`` sessions (the
            protocol's ``max_concurrent_envs``; default 1, like the
            reference). Values above 1 are refused for an environment class
            whose ``SUPPORTS_CONCURRENT_SESSIONS`` is false (checked when
            ``factory`` is a class).
        max_message_size: the largest inbound WebSocket message in bytes;
            larger ones close the connection with code 1009.
        name: the name reported by ``GET /metadata`` (default: the
            environment class name).
        ping_interval: seconds between keepalive pings (``None``: off).
        ping_timeout: seconds to wait for a pong before closing with 1011.
        ssl: a server-side `ssl.SSLContext` (with its certificate
            loaded) to serve ``https://``/``wss://`` instead of plain HTTP.
        idle_timeout: seconds a ``/ws`` session may go without a message from
            its client before the server closes it (code 1001, reason
            ``"idle timeout: ..."``) and frees its slot; ``None``: never.
            Keepalive pings do not count as messages. The default (300 s)
            keeps forgotten clients from holding every slot forever.
        max_pending: the most TCP connections whose opening handshake (or
            plain HTTP request) is still in progress; each costs a socket (and,
            on the threading transport, two threads). Connections beyond it
            are answered ``503`` (once their request head is read, so that
            the client gets the answer, not a reset) and closed. Default
            (``None``): 64, or twice ``max_sessions`` when that is larger,
            so that a pool can open all its sessions at once.
        handshake_timeout: seconds a connection may take to send its HTTP
            request and complete the handshake (``None``: no limit).
        transport: ``"asyncio"`` (websockets' asyncio server on an event loop
            in a thread of its own: no thread per connection; environments
            that do not block run on the loop, blocking ones get a worker
            thread per session) or ``"threads"`` (websockets' threading server:
            every connection runs in its own threads). Default (``None``):
            ``$OPENENV_SERVER_TRANSPORT`` if set, else ``"asyncio"``.
            The threading transport costs two threads per connection: it is
            unfit for bursts of hundreds of simultaneous opens (1,000 at once
            took up to 25 s and 3,000 threads); use ``"asyncio"`` or the ASGI
            app for many independent clients.
        backlog: the listening socket's backlog (default 2048, uvicorn's):
            connections the kernel queues until the server accepts them, so
            a burst of connects does not wait for SYN retransmits.
    """

    def __init__(
        self,
        factory: EnvFactory,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_sessions: int = 1,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        name: str | None = None,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        ssl: _ssl.SSLContext | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_pending: int | None = None,
        handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
        transport: Transport | None = None,
        backlog: int = DEFAULT_BACKLOG,
    ) -> None:
        if isinstance(backlog, bool) or not isinstance(backlog, int) or backlog < 1:
            raise ValueError(f"backlog must be a positive int, not {backlog!r}")
        self._backlog = backlog
        if max_message_size < 1:
            raise ValueError(f"max_message_size must be positive, not {max_message_size}")
        for what, value in (("idle_timeout", idle_timeout), ("handshake_timeout", handshake_timeout)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"{what} must be a positive number of seconds or None, not {value!r}")
        if max_pending is not None and (
            isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1
        ):
            raise ValueError(f"max_pending must be a positive int or None, not {max_pending!r}")
        chosen: str = transport or os.environ.get("OPENENV_SERVER_TRANSPORT", "").strip() or "asyncio"
        if chosen not in _TRANSPORTS:
            raise ValueError(f"transport must be 'asyncio' or 'threads', not {chosen!r}")
        self._transport: Transport = "threads" if chosen == "threads" else "asyncio"
        self._protocol = EnvProtocol(factory, max_sessions=max_sessions, name=name)
        if max_pending is None:
            max_pending = max(DEFAULT_MAX_PENDING, 2 * self._protocol.max_sessions)
        self._factory_name = self._protocol.factory_name
        self._host = host
        self._port = port
        self._max_message_size = max_message_size
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        if ssl is not None and not isinstance(ssl, _ssl.SSLContext):
            raise TypeError(f"ssl must be an ssl.SSLContext or None, not {type(ssl).__name__}")
        self._ssl = ssl
        self._idle_timeout = None if idle_timeout is None else float(idle_timeout)
        self._max_pending = max_pending
        self._handshake_timeout = None if handshake_timeout is None else float(handshake_timeout)

        self._lock = threading.Lock()  # guards _pending
        self._pending = 0
        self._lifecycle = threading.Lock()  # serialises start()/stop()
        self._server: Server | AsyncioTransport | None = None
        self._thread: threading.Thread | None = None
        # websockets < 17 keeps no list of connections: each one and the thread running it, for stop()
        self._connections: dict[threading.Thread, ServerConnection] = {}

    # ------------------------------------------------------------------ info

    @property
    def host(self) -> str:
        """The interface the server binds to."""
        return self._host

    @property
    def port(self) -> int:
        """The TCP port; the real one once started (``0`` before, if ephemeral)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` (``https://`` with ``ssl``), the base URL to give a client."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{host}:{self._port}"

    @property
    def ws_url(self) -> str:
        """``ws://<host>:<port>/ws`` (``wss://`` with ``ssl``), the session endpoint."""
        return "ws" + self.url[4:] + _WS_PATH

    @property
    def max_sessions(self) -> int:
        """The session capacity."""
        return self._protocol.max_sessions

    @property
    def active_sessions(self) -> int:
        """The number of ``/ws`` sessions holding a capacity slot right now."""
        return self._protocol.active_sessions

    @property
    def idle_timeout(self) -> float | None:
        """Seconds of client silence after which a session is closed (``None``: never)."""
        return self._idle_timeout

    @property
    def transport(self) -> Transport:
        """``"asyncio"`` or ``"threads"``: what carries the connections."""
        return self._transport

    @property
    def max_pending(self) -> int:
        """The most connections whose handshake may be in progress at once."""
        return self._max_pending

    @property
    def pending_connections(self) -> int:
        """Connections accepted whose handshake or HTTP request is still in progress."""
        with self._lock:
            return self._pending

    @property
    def running(self) -> bool:
        """Whether the server is started and not stopped."""
        return self._server is not None

    @property
    def name(self) -> str:
        """The environment's name (``name`` argument, else its class name).

        For a factory that is not a class, the class is found by creating (and
        closing) one instance, once.
        """
        return self._protocol.name

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        sessions = f"{self.active_sessions}/{self._protocol.max_sessions}"
        return f"<EnvServer {self._factory_name} {self.url} {state} sessions={sessions}>"

    # ------------------------------------------------------------- lifecycle

    def start(self) -> EnvServer:
        """Bind and serve in a background daemon thread; return ``self``.

        Idempotent while running. After `stop()`, ``start()`` serves again
        on the same port (the one bound first, when ``port`` was 0).
        """
        with self._lifecycle:
            if self._server is not None:
                return self
            if self._transport == "asyncio":
                aio = AsyncioTransport(self)
                self._port = aio.start()
                self._server, self._thread = aio, aio.thread
                logger.info(
                    "serving %s on %s (max_sessions=%d)", self._factory_name, self.url, self._protocol.max_sessions
                )
                return self
            server = _ws_serve(
                self._handle_session,
                self._host,
                self._port,
                process_request=self._process_request,
                create_connection=_make_connection_class(self),
                open_timeout=self._handshake_timeout,
                max_size=self._max_message_size,
                ping_interval=self._ping_interval,
                ping_timeout=self._ping_timeout,
                ssl=self._ssl,
                logger=server_logger(),
                backlog=self._backlog,
            )
            self._port = server.socket.getsockname()[1]
            thread = threading.Thread(target=server.serve_forever, name=f"openenv-server-{self._port}", daemon=True)
            self._server, self._thread = server, thread
            thread.start()
        logger.info("serving %s on %s (max_sessions=%d)", self._factory_name, self.url, self._protocol.max_sessions)
        return self

    def stop(self) -> None:
        """Stop accepting connections, close every open session, and wait.

        Open ``/ws`` connections are closed with code 1012 (service restart),
        so clients see the drop; each session's environment is closed and its
        slot freed. Returns when every connection thread has finished (a
        ``step`` still running is waited for). Idempotent. Do not call it from
        inside an environment.
        """
        with self._lifecycle:
            server, thread = self._server, self._thread
            self._server = self._thread = None
            if server is None:
                return
            if isinstance(server, AsyncioTransport):
                server.stop()
            elif SYNC_SHUTDOWN_CLOSES:
                server.shutdown(close_connections=True, code=CloseCode.SERVICE_RESTART, reason="server stopping")
                if thread is not None:
                    thread.join()
            else:
                server.shutdown()  # websockets < 17: only stops accepting
                if thread is not None:
                    thread.join()  # serve_forever has returned: no new connection threads from here on
                self._close_connections(CloseCode.SERVICE_RESTART, "server stopping")
        logger.info("stopped %s on %s", self._factory_name, self.url)

    def serve_forever(self, on_ready: Callable[[EnvServer], None] | None = None) -> None:
        """Start (if needed) and block until interrupted, then stop.

        Ctrl-C (and, in the main thread, SIGTERM) stops the server cleanly.

        Args:
            on_ready: called with the server once it is listening.
        """
        self.start()
        thread = self._thread
        previous: Any = None
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            if on_ready is not None:
                on_ready(self)
            while thread is not None and thread.is_alive():
                thread.join(1.0)
        except KeyboardInterrupt:
            logger.info("interrupted; stopping")
        finally:
            try:
                self.stop()
            finally:
                if in_main:
                    signal.signal(signal.SIGTERM, previous)

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ HTTP

    def _process_request(self, connection: Any, request: Request) -> Response | None:
        """websockets' handshake hook: accept ``/ws`` upgrades, answer HTTP requests."""
        path = request.path.split("?", 1)[0]
        if _is_upgrade(request):
            if path != _WS_PATH:
                return _http_response(403, b"Forbidden", "text/plain; charset=utf-8")
            if not hasattr(type(connection), "slot"):
                return None  # not our connection class: the handler checks capacity
            if not self._protocol.reserve_slot():
                return _to_response(self._protocol.capacity_reply())
            connection.slot = True
            return None  # perform the WebSocket handshake
        return _to_response(_http.embedded(self._protocol, method_of(request), path))

    def _body_response(self, request: Request, too_large: bool) -> Response:
        """The answer to an HTTP request that carries a body (this server takes none)."""
        path = request.path.split("?", 1)[0]
        return _to_response(_http.embedded_with_body(method_of(request), path, too_large=too_large))

    # ------------------------------------------------------- bookkeeping

    def _track(self, connection: ServerConnection) -> None:
        """Remember ``connection`` and the thread running it (created in that thread)."""
        with self._lock:
            for done in [t for t in self._connections if not t.is_alive()]:
                del self._connections[done]
            self._connections[threading.current_thread()] = connection

    def _close_connections(self, code: CloseCode, reason: str) -> None:
        """Close every connection and wait for its thread, as websockets 17's ``shutdown`` does.

        Open sessions get the closing handshake with ``code``; connections
        still in their opening handshake are dropped.
        """
        while True:
            with self._lock:
                tracked = [(t, c) for t, c in self._connections.items() if t.is_alive()]
                self._connections.clear()
            if not tracked:
                return
            closers = []
            for thread, connection in tracked:
                if thread is threading.current_thread():
                    continue
                if connection.protocol.state is OPEN:
                    closer = threading.Thread(target=connection.close, args=(code, reason), daemon=True)
                    closer.start()
                    closers.append(closer)
                elif connection.protocol.state is CONNECTING:
                    drop(connection)
            for closer in closers:
                closer.join()
            for thread, _ in tracked:
                if thread is not threading.current_thread():
                    thread.join()

    def _enter_pending(self) -> bool:
        with self._lock:
            if self._pending >= self._max_pending:
                refused = True
            else:
                self._pending += 1
                refused = False
        if refused:
            logger.warning("refusing a connection: %d handshakes already pending", self._max_pending)
        return not refused

    def _leave_pending(self) -> None:
        with self._lock:
            self._pending -= 1

    # ------------------------------------------------------------- WebSocket

    def _handle_session(self, connection: ServerConnection) -> None:
        """One ``/ws`` connection: take its slot, create the env, run the loop, clean up."""
        reserved = bool(getattr(connection, "slot", False))
        if reserved:
            connection.slot = False  # type: ignore[attr-defined]  # reserved by process_request: ours now
        session, error = self._protocol.open_session(reserved=reserved)
        if session is None:
            if error is not None:
                _send(connection, error)
            return  # websockets closes with 1000
        peer = _peer(connection)
        logger.debug("session opened (%s)", peer)
        try:
            self._session_loop(connection, session)
        finally:
            self._protocol.end_session(session)
            logger.debug("session closed (%s)", peer)

    def _session_loop(self, connection: ServerConnection, session: Session) -> None:
        idle = self._idle_timeout
        while True:
            try:
                raw = connection.recv(timeout=idle)
            except ConnectionClosed:
                return
            except TimeoutError:
                logger.info("closing a session idle for %g s", idle)
                connection.close(CloseCode.GOING_AWAY, f"idle timeout: no message for {idle:g} s")
                return
            reply, keep_open = session.run(lambda raw=raw: session.handle(raw))  # type: ignore[misc]
            if reply is not None and not _send(connection, reply):
                return
            if not keep_open:
                return


def _send(connection: ServerConnection, frame: str) -> bool:
    """Send one text frame; ``False`` if the connection is gone."""
    try:
        payload = frame.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from the client's JSON: re-encode as ASCII escapes
        payload = json.dumps(json.loads(frame), separators=(",", ":"), allow_nan=False).encode("ascii")
    try:
        connection.send(payload, text=True)
    except ConnectionClosed:
        return False
    return True


def _peer(connection: ServerConnection) -> str:
    try:
        return str(connection.remote_address)
    except OSError:  # the socket is already closed
        return "?"


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve(
    factory: EnvFactory,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 1,
    *,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    name: str | None = None,
    on_ready: Callable[[EnvServer], None] | None = None,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_pending: int | None = None,
    transport: Transport | None = None,
    backlog: int = DEFAULT_BACKLOG,
) -> None:
    """Serve ``factory`` until interrupted (Ctrl-C or SIGTERM); a blocking convenience.

    Args:
        factory: an [`Environment`][openenv.server.Environment] subclass or a zero-argument callable.
        host: interface to bind.
        port: TCP port (``0``: ephemeral).
        max_sessions: concurrent ``/ws`` sessions.
        max_message_size: largest inbound WebSocket message, in bytes.
        name: the name ``/metadata`` reports.
        on_ready: called with the [`EnvServer`][openenv.server.EnvServer] once it is listening.
        idle_timeout: seconds without a client message before a session is closed (``None``: never).
        max_pending: connections still in their handshake, at most (more get ``503`` at once);
            ``None``: 64 or twice ``max_sessions``, whichever is larger.
        transport: ``"asyncio"`` or ``"threads"`` (see [`EnvServer`][openenv.server.EnvServer]).
        backlog: the listening socket's backlog (see [`EnvServer`][openenv.server.EnvServer]).
    """
    EnvServer(
        factory,
        host=host,
        port=port,
        max_sessions=max_sessions,
        max_message_size=max_message_size,
        name=name,
        idle_timeout=idle_timeout,
        max_pending=max_pending,
        transport=transport,
        backlog=backlog,
    ).serve_forever(on_ready=on_ready)
