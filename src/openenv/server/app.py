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
  connection in websockets' own threads instead (`openenv.server._threads`).
  This module is the facade: it checks the options, freezes them into the
  `openenv.server._settings.ServerSettings` each transport is given with the
  protocol, and starts and stops the chosen transport.
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

import dataclasses
import logging
import os
import signal
import socket
import ssl as _ssl
import threading
from collections.abc import Callable
from typing import Any

from ._aio import AsyncioTransport
from ._http import WS_PATH as _WS_PATH
from ._settings import (
    DEFAULT_BACKLOG,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_PENDING,
    PendingGate,
    ServerSettings,
    Transport,
    check_count,
    check_listener,
    check_seconds,
    check_ssl,
    check_transport,
    raise_keyboard_interrupt,
)
from ._threads import ThreadsTransport
from ._wire import step_result
from .protocol import EnvFactory, EnvProtocol

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
        sock: a TCP socket, already bound, to serve on instead of binding
            ``host`` and ``port`` (which then read its address), as
            websockets' ``serve(sock=)`` and ``uvicorn --fd`` do: a parent
            process that binds it and hands it down leaves no moment in which
            another program can take the port. The server makes it listen
            (with ``backlog``) and owns it: `stop()` (or a failed `start()`)
            closes it, so the server serves once (`start()` after `stop()`
            raises).
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
        sock: socket.socket | None = None,
    ) -> None:
        backlog = check_count("backlog", backlog)
        sock = check_listener(sock)
        if sock is not None:
            host, port = sock.getsockname()[:2]
        max_message_size = check_count("max_message_size", max_message_size, unit="bytes")
        idle = check_seconds("idle_timeout", idle_timeout)
        handshake = check_seconds("handshake_timeout", handshake_timeout)
        if max_pending is not None:
            max_pending = check_count("max_pending", max_pending)
        chosen: str = transport or os.environ.get("OPENENV_SERVER_TRANSPORT", "").strip() or "asyncio"
        self._transport: Transport = check_transport(chosen)
        self._protocol = EnvProtocol(factory, max_sessions=max_sessions, name=name)
        if max_pending is None:
            max_pending = max(DEFAULT_MAX_PENDING, 2 * self._protocol.max_sessions)
        self._factory_name = self._protocol.factory_name
        #: what a transport is given (with the protocol and the pending gate); ``port`` becomes the bound one
        self._settings = ServerSettings(
            host=host,
            port=port,
            max_message_size=max_message_size,
            ping_interval=ping_interval,
            ping_timeout=ping_timeout,
            ssl=check_ssl(ssl),
            idle_timeout=idle,
            handshake_timeout=handshake,
            backlog=backlog,
            sock=sock,
        )
        self._pending = PendingGate(max_pending)
        self._served_sock = False  # whether a start() served the given sock (then stop() closed it)
        self._lifecycle = threading.Lock()  # serialises start()/stop()
        self._server: ThreadsTransport | AsyncioTransport | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ info

    @property
    def host(self) -> str:
        """The interface the server binds to."""
        return self._settings.host

    @property
    def port(self) -> int:
        """The TCP port; the real one once started (``0`` before, if ephemeral)."""
        return self._settings.port

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` (``https://`` with ``ssl``), the base URL to give a client."""
        settings = self._settings
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        scheme = "https" if settings.ssl is not None else "http"
        return f"{scheme}://{host}:{settings.port}"

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
        return self._settings.idle_timeout

    @property
    def transport(self) -> Transport:
        """``"asyncio"`` or ``"threads"``: what carries the connections."""
        return self._transport

    @property
    def max_pending(self) -> int:
        """The most connections whose handshake may be in progress at once."""
        return self._pending.limit

    @property
    def pending_connections(self) -> int:
        """Connections accepted whose handshake or HTTP request is still in progress."""
        return self._pending.count

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
        on the same port (the one bound first, when ``port`` was 0); a server
        given ``sock`` serves once.

        Raises:
            OSError: the port cannot be bound (a given ``sock`` is closed then).
            RuntimeError: a server given ``sock`` was stopped (which closed it),
                or the socket was closed before this start.
        """
        with self._lifecycle:
            if self._server is not None:
                return self
            sock = self._settings.sock
            if sock is not None and sock.fileno() < 0:
                if self._served_sock:
                    raise RuntimeError("this EnvServer served its sock, and stop() closed it; make a new one")
                raise RuntimeError("the sock given to this EnvServer was closed before start()")
            kind = AsyncioTransport if self._transport == "asyncio" else ThreadsTransport
            server = kind(self._settings, self._protocol, self._pending)
            try:
                port = server.start()
            except BaseException:
                if sock is not None:  # the server owns it: a failed start leaves nothing listening
                    sock.close()
                raise
            self._served_sock = sock is not None
            self._settings = dataclasses.replace(self._settings, port=port)  # the same port on a later start()
            self._server, self._thread = server, server.thread
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
            server = self._server
            self._server = self._thread = None
            if server is None:
                return
            server.stop()
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
            previous = signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
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
    sock: socket.socket | None = None,
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
        sock: a bound TCP socket to serve on instead of ``host`` and ``port`` (see
            [`EnvServer`][openenv.server.EnvServer]); closed when serving ends.
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
        sock=sock,
    ).serve_forever(on_ready=on_ready)
