"""The threading transport of [`EnvServer`][openenv.server.EnvServer] (``transport="threads"``).

websockets' threading server: every connection runs in its own threads (the
handler's and the connection's reader), its frames through the sans-I/O
`openenv.server.protocol`; the HTTP hooks and the handshake's slot rule are
`openenv.server._wsserve`'s, shared with the asyncio transport.  It is given
what it needs (`ThreadsTransport(settings, protocol, pending)`) and reads
nothing else of the facade.

websockets' threading server starts two threads and holds the socket for every
accepted TCP connection until its opening handshake completes or
``open_timeout`` passes. ``_Connection`` counts those pending handshakes and
refuses connections beyond ``max_pending`` at once (a raw ``503`` and a close),
so a flood of idle or slow TCP connections cannot exhaust threads or
descriptors. It also reads HTTP requests itself, so that a request with a body
(``POST /reset`` ...) is answered (``405``/``501``/``413``) instead of dropped.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.protocol import CONNECTING, OPEN
from websockets.server import ServerProtocol
from websockets.sync.server import Server, ServerConnection
from websockets.sync.server import serve as _ws_serve

from ._refusal import refuse_socket
from ._settings import STOP_CLOSE, PendingGate, ServerSettings, idle_close
from ._wscompat import SYNC_SHUTDOWN_CLOSES, drop, install_request_parser, read_after_fail, server_logger
from ._wsserve import body_response, claim_slot, handshake_ended, payload, process_request
from .protocol import EnvProtocol, Session

__all__ = ["ThreadsTransport"]

logger = logging.getLogger("openenv.server")


class _Refused(Exception):
    """Raised from ``_Connection.__init__`` to make websockets drop a connection."""


class ThreadsTransport:
    """Serves one protocol on websockets' threading server, its accept loop in a thread of its own."""

    def __init__(self, settings: ServerSettings, protocol: EnvProtocol, pending: PendingGate) -> None:
        self._settings = settings
        self._protocol = protocol
        self._pending = pending
        self._server: Server | None = None
        self.thread: threading.Thread | None = None
        self._stopping = False  # stop() ran: the listening socket may be closed under the accept loop
        self._lock = threading.Lock()  # guards _connections
        # websockets < 17 keeps no list of connections: each one and the thread running it, for stop()
        self._connections: dict[threading.Thread, ServerConnection] = {}

    # ------------------------------------------------------------- lifecycle

    def start(self) -> int:
        """Bind, serve in a new daemon thread, and return the bound port (raises ``OSError`` if binding fails)."""
        settings = self._settings
        server = _ws_serve(
            self._handle_session,
            process_request=functools.partial(process_request, self._protocol),
            create_connection=_make_connection_class(self),
            logger=server_logger(),
            **settings.serve_options(),
        )
        port: int = server.socket.getsockname()[1]
        name = f"openenv-server-{port}"
        thread = threading.Thread(target=self._serve_forever, args=(server,), name=name, daemon=True)
        self._server, self.thread = server, thread
        thread.start()
        return port

    def _serve_forever(self, server: Server) -> None:
        """websockets' accept loop; an ``OSError`` from a listening socket that ``stop()`` closed ends it quietly.

        websockets < 17 returns quietly when ``shutdown()`` closed the socket before its loop registered it
        (``ValueError``), but not when the close lands between the descriptor's lookup and the registration
        (``OSError: [Errno 9] Bad file descriptor``, an unhandled exception in the server's thread; seen in CI
        with a start cancelled at once). websockets 17 catches both itself.
        """
        try:
            server.serve_forever()
        except OSError:
            if not self._stopping:
                raise

    def stop(self) -> None:
        """Close every session (1012), stop accepting, and wait for every connection's thread."""
        server, thread = self._server, self.thread
        if server is None:
            return
        self._stopping = True
        if SYNC_SHUTDOWN_CLOSES:
            server.shutdown(close_connections=True, code=STOP_CLOSE[0], reason=STOP_CLOSE[1])
            if thread is not None:
                thread.join()
        else:
            server.shutdown()  # websockets < 17: only stops accepting
            if thread is not None:
                thread.join()  # serve_forever has returned: no new connection threads from here on
            self._close_connections(*STOP_CLOSE)

    # ------------------------------------------------------- bookkeeping

    def _track(self, connection: ServerConnection) -> None:
        """Remember ``connection`` and the thread running it (created in that thread)."""
        with self._lock:
            for done in [t for t in self._connections if not t.is_alive()]:
                del self._connections[done]
            self._connections[threading.current_thread()] = connection

    def _close_connections(self, code: int, reason: str) -> None:
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

    # ------------------------------------------------------------- WebSocket

    def _handle_session(self, connection: ServerConnection) -> None:
        """One ``/ws`` connection: take its slot, create the env, run the loop, clean up."""
        protocol = self._protocol
        session, error = protocol.open_session(reserved=claim_slot(connection))
        if session is None:
            if error is not None:
                _send(connection, error)
            return  # websockets closes with 1000
        peer = _peer(connection)
        logger.debug("session opened (%s)", peer)
        try:
            self._session_loop(connection, session)
        finally:
            protocol.end_session(session)
            logger.debug("session closed (%s)", peer)

    def _session_loop(self, connection: ServerConnection, session: Session) -> None:
        idle = self._settings.idle_timeout
        while True:
            try:
                raw = connection.recv(timeout=idle)
            except ConnectionClosed:
                return
            except TimeoutError:
                connection.close(*idle_close(idle))  # type: ignore[arg-type]  # idle is not None here
                return
            reply, keep_open = session.run(lambda raw=raw: session.handle(raw))  # type: ignore[misc]
            if reply is not None and not _send(connection, reply):
                return
            if not keep_open:
                return


def _make_connection_class(transport: ThreadsTransport) -> type[ServerConnection]:
    """A ``ServerConnection`` subclass bound to ``transport`` (websockets' ``create_connection``)."""
    pending, protocol = transport._pending, transport._protocol

    class _Connection(ServerConnection):
        #: Whether this connection holds a reserved session slot (set by ``process_request``).
        slot = False

        # websockets 17 passes the server as a third argument; 15 and 16 do not.
        def __init__(self, sock: socket.socket, protocol_: ServerProtocol, *args: Any, **kwargs: Any) -> None:
            if not pending.enter():
                refuse_socket(sock)
                raise _Refused
            try:
                install_request_parser(protocol_, body_response)
                super().__init__(sock, protocol_, *args, **kwargs)
                read_after_fail(self)
            except BaseException:
                pending.leave()
                raise
            transport._track(self)

        def handshake(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().handshake(*args, **kwargs)
            finally:
                pending.leave()
                handshake_ended(self, protocol)

    return _Connection


def _send(connection: ServerConnection, frame: str) -> bool:
    """Send one text frame; ``False`` if the connection is gone."""
    try:
        connection.send(payload(frame), text=True)
    except ConnectionClosed:
        return False
    return True


def _peer(connection: ServerConnection) -> str:
    try:
        return str(connection.remote_address)
    except OSError:  # the socket is already closed
        return "?"
