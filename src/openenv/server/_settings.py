"""What a server transport is given, and the one checker of the server's options.

[`EnvServer`][openenv.server.EnvServer] checks its arguments here, freezes
them into a `ServerSettings`, and hands each transport (`openenv.server._threads`,
`openenv.server._aio`) that, the sans-I/O `openenv.server.protocol.EnvProtocol`
and a `PendingGate`: a transport reads nothing else of the facade.  The ASGI
app (`openenv.server.asgi`) checks its options with the same functions, so one
bad value gets one message whichever way the server is started.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import ssl as _ssl
import threading
from types import FrameType
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_BACKLOG",
    "Transport",
    "TRANSPORTS",
    "ServerSettings",
    "PendingGate",
    "check_seconds",
    "check_count",
    "check_transport",
    "check_ssl",
    "check_listener",
    "listener_problem",
    "listener_from_fd",
    "idle_close",
    "STOP_CLOSE",
    "raise_keyboard_interrupt",
]

logger = logging.getLogger("openenv.server")

#: Largest inbound WebSocket message accepted by default (uvicorn's ``ws_max_size``).
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

#: Seconds without a client message after which a ``/ws`` session is closed.
DEFAULT_IDLE_TIMEOUT = 300.0

#: Connections whose handshake or HTTP request is still in progress, at most: this, or twice
#: ``max_sessions`` when that is larger (so a pool can open every session at once).
DEFAULT_MAX_PENDING = 64

#: The listening socket's backlog: connections the kernel holds until they are accepted (uvicorn's default).
#: A burst of connects beyond it waits for a SYN retransmit (1 s, then 3 s, ...).  The kernel caps it at
#: ``net.core.somaxconn`` (4096 on Linux 5.4+).
DEFAULT_BACKLOG = 2048

#: Seconds a connection has to send its request and finish the handshake (websockets' ``open_timeout``).
DEFAULT_HANDSHAKE_TIMEOUT = 10.0

#: ``"asyncio"`` (the default: one event loop, no thread per connection) or ``"threads"``
#: (websockets' threading server: a thread per connection).
Transport = Literal["asyncio", "threads"]

TRANSPORTS: tuple[Transport, ...] = ("asyncio", "threads")


# ------------------------------------------------------------------ checks


#: How every transport's ``stop()`` closes the open sessions: 1012 (service restart), a reason to reconnect.
STOP_CLOSE: tuple[int, str] = (1012, "server stopping")


def idle_close(idle: float) -> tuple[int, str]:
    """How every transport closes a session whose client sent nothing for ``idle`` seconds: code and reason.

    ``1001`` (going away), so a client knows the server ended it and why;
    logged at INFO as the close is sent.
    """
    logger.info("closing a session idle for %g s", idle)
    return 1001, f"idle timeout: no message for {idle:g} s"


def check_seconds(what: str, value: object) -> float | None:
    """``value`` as a float number of seconds, or ``None`` (no limit).

    Raises:
        ValueError: ``value`` is not a positive number (a bool is not a number here).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds or None, not {value!r}")
    return float(value)


def check_count(what: str, value: object, *, minimum: int = 1, unit: str = "") -> int:
    """``value`` as an int of at least ``minimum`` (``unit``, e.g. ``"bytes"``, goes into the message).

    Raises:
        ValueError: ``value`` is not an int (a bool is not one here), or is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = f"an int, in {unit}" if unit else "an int"
        raise ValueError(f"{what} must be at least {minimum} ({kind}), not {value!r}")
    return value


def check_transport(value: str) -> Transport:
    """``"asyncio"`` or ``"threads"``.

    Raises:
        ValueError: anything else.
    """
    if value == "threads":
        return "threads"
    if value == "asyncio":
        return "asyncio"
    raise ValueError(f"transport must be 'asyncio' or 'threads', not {value!r}")


def check_ssl(value: object) -> _ssl.SSLContext | None:
    """A server-side `ssl.SSLContext`, or ``None``.

    Raises:
        TypeError: anything else.
    """
    if value is not None and not isinstance(value, _ssl.SSLContext):
        raise TypeError(f"ssl must be an ssl.SSLContext or None, not {type(value).__name__}")
    return value


def listener_problem(sock: socket.socket) -> str | None:
    """What keeps ``sock`` from being served on (``None``: nothing), as the end of a sentence about it."""
    if sock.fileno() < 0:
        return "is closed"
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return f"is not an IPv4 or IPv6 socket ({sock.family.name})"
    try:
        kind = sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
        port = sock.getsockname()[1]
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if kind != socket.SOCK_STREAM:
        return "is not a TCP (stream) socket"
    if port == 0:
        return "is not bound to an address"
    try:
        sock.getpeername()
    except OSError:
        return None
    return "is connected to a peer, not a listener"


def check_listener(value: object) -> socket.socket | None:
    """A TCP socket bound to an address (IPv4 or IPv6) for a server to listen on, or ``None``.

    The server calls ``listen()`` on it with its backlog, so a bound socket that
    does not listen yet will do; an unbound one would listen on a port the kernel
    picks on every interface, and is refused.

    Raises:
        TypeError: not a `socket.socket`.
        ValueError: closed, not a TCP socket of IPv4 or IPv6, not bound, or connected.
    """
    if value is None:
        return None
    if not isinstance(value, socket.socket):
        raise TypeError(f"sock must be a socket.socket or None, not {type(value).__name__}")
    problem = listener_problem(value)
    if problem is not None:
        raise ValueError(f"sock {problem}; pass a TCP socket bound with sock.bind((host, port))")
    return value


def listener_from_fd(fd: int) -> socket.socket:
    """The listening socket a parent process handed down as file descriptor ``fd`` (``serve --fd``).

    The socket owns ``fd`` from here on (closing it closes ``fd``), and it is
    made non-inheritable, as a socket the server binds itself is: a program
    the environment starts does not keep the port open after the server ends.

    Raises:
        ValueError: ``fd`` is not an open TCP socket bound to an address (`listener_problem`).
    """
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise ValueError(f"not an open socket ({exc.strerror or exc})") from None
    problem = listener_problem(sock)
    if problem is not None:
        sock.detach()  # not ours to close
        raise ValueError(f"the socket {problem}; hand down a TCP socket bound to the address to serve on")
    sock.set_inheritable(False)
    return sock


# ---------------------------------------------------------------- settings


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """Everything a websockets transport needs to listen and to bound its connections (checked already)."""

    host: str
    #: the port to bind; ``0``: an ephemeral one (the facade keeps the bound one for the next start)
    port: int
    max_message_size: int
    ping_interval: float | None
    ping_timeout: float | None
    ssl: _ssl.SSLContext | None
    #: seconds of client silence after which a ``/ws`` session is closed (``None``: never)
    idle_timeout: float | None
    #: seconds a connection has to finish its handshake (websockets' ``open_timeout``; ``None``: no limit)
    handshake_timeout: float | None
    backlog: int
    #: a socket to listen on instead of binding ``host``:``port`` (checked; its address is ``host`` and ``port``)
    sock: socket.socket | None = None

    def serve_options(self) -> dict[str, Any]:
        """The keyword arguments of websockets' ``serve()`` (threading or asyncio) that these settings make.

        Where it listens: ``host`` and ``port`` with ``backlog`` (websockets' default: 100), or ``sock``,
        made to listen with ``backlog`` here (websockets' threading server takes a given socket as it is).
        """
        if self.sock is None:
            where: dict[str, Any] = {"host": self.host, "port": self.port, "backlog": self.backlog}
        else:  # the asyncio server's create_server(sock=) listens again, with its backlog argument (default 100)
            self.sock.listen(self.backlog)
            where = {"sock": self.sock, "backlog": self.backlog}
        return {
            **where,
            "open_timeout": self.handshake_timeout,
            "max_size": self.max_message_size,
            "ping_interval": self.ping_interval,
            "ping_timeout": self.ping_timeout,
            "ssl": self.ssl,
        }


class PendingGate:
    """Counts connections whose handshake (or HTTP request) is in progress, and refuses those beyond a cap.

    Thread-safe: the threading transport enters and leaves from each
    connection's thread, the asyncio transport from its loop, and
    [`EnvServer.pending_connections`][openenv.server.EnvServer.pending_connections]
    reads it from anywhere.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._count = 0

    @property
    def count(self) -> int:
        """Connections in their handshake right now."""
        with self._lock:
            return self._count

    def enter(self) -> bool:
        """Count one more connection; ``False`` (and a warning) when ``limit`` are pending already."""
        with self._lock:
            if self._count >= self.limit:
                refused = True
            else:
                self._count += 1
                refused = False
        if refused:
            logger.warning("refusing a connection: %d handshakes already pending", self.limit)
        return not refused

    def leave(self) -> None:
        """A connection counted by `enter()` finished its handshake (or failed it)."""
        with self._lock:
            self._count -= 1


def raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    """A ``SIGTERM`` handler that stops a blocking ``serve`` as Ctrl-C does."""
    raise KeyboardInterrupt
