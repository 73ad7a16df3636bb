"""The one way every transport refuses a connection beyond its pending cap.

Each transport caps the connections still in their handshake (or waiting for a
request head: `openenv.server._settings.PendingGate`, and
`openenv.server.asgi.uvicorn_config()`'s cap).  A connection beyond it is
refused the same way on all three: its request head is skipped (up to
`REFUSED_SKIP` bytes, within `REFUSED_LINGER` seconds; never parsed), then
answered with the raw `OVERLOADED` ``503`` and a half-close, so that the client
reads the 503 as the answer to its request rather than a reset (a socket
closed with the client's request unread ends in an RST, which a pool reads as
"closed during the handshake" and does not retry, where it retries a 503).

`Refusal` does it on an asyncio transport (the asyncio server, the ASGI app
under uvicorn); `refuse_socket()` on a blocking socket (the threading server).
"""

from __future__ import annotations

import asyncio
import socket
import time

__all__ = ["OVERLOADED", "REFUSED_LINGER", "REFUSED_SKIP", "Refusal", "refuse_socket"]

#: The raw answer to a connection beyond the pending cap (sent without parsing the request).
_OVERLOADED_BODY = b'{"detail":"Too many pending connections: the server is overloaded; retry later"}'
OVERLOADED = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Connection: close\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_OVERLOADED_BODY), _OVERLOADED_BODY)
)

#: Seconds a connection refused by the pending cap is kept to drain the client's request, and again after
#: the 503 for the client to read it.  1 s was too short on a loaded machine: a client thread that sent its
#: request late found the socket aborted, its 503 lost to the reset ("closed during the handshake", which a
#: pool does not retry, where a 503 is retried).
REFUSED_LINGER = 3.0

#: Bytes of a refused connection's request skipped, at most, before the 503.
REFUSED_SKIP = 8192


class Refusal:
    """One refused connection on an asyncio transport; its protocol hands on ``data``, EOF and the loss.

    Made on the loop in ``connection_made``: the answer goes out once the
    request head is skipped, or after `REFUSED_LINGER` seconds; a client
    still there `REFUSED_LINGER` seconds after the answer is dropped.
    """

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._skipped: bytes | None = b""  # the request head so far; None once answered
        self._drop = asyncio.get_running_loop().call_later(REFUSED_LINGER, self.answer)

    def data_received(self, data: bytes) -> None:
        """More of the request: skipped; the answer once its head is complete (or too long)."""
        if self._skipped is None:
            return  # answered: discard the rest until the client's EOF
        self._skipped = (self._skipped + data)[-REFUSED_SKIP:]
        if b"\r\n\r\n" in self._skipped or len(self._skipped) >= REFUSED_SKIP:
            self.answer()

    def answer(self) -> None:
        """Answer ``503`` (once) and shut the write side; drop the socket if the client lingers."""
        transport = self._transport
        if self._skipped is None:
            transport.abort()  # the linger ran out after the answer
            return
        self._skipped = None
        self._drop.cancel()
        try:
            transport.write(OVERLOADED)
            if transport.can_write_eof():
                transport.write_eof()
            self._drop = asyncio.get_running_loop().call_later(REFUSED_LINGER, transport.abort)
        except (OSError, RuntimeError):
            transport.abort()

    def eof_received(self) -> bool:
        """The client's EOF: answer if not yet, then close once the answer is flushed."""
        if self._skipped is not None:
            self.answer()
        self._transport.close()
        return True

    def connection_lost(self) -> None:
        """The socket is gone: no timer left behind."""
        self._drop.cancel()


def refuse_socket(sock: socket.socket) -> None:
    """Skip the request head, answer ``503`` with a half-close, and wait a moment for the client's EOF.

    `Refusal` on a blocking socket, in the connection's own thread: each step
    bounded by the linger (3 s); the caller closes the socket.
    """
    deadline = time.monotonic() + REFUSED_LINGER
    try:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < REFUSED_SKIP:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(4096)
            if not chunk:
                break
            head = (head + chunk)[-REFUSED_SKIP:]
        sock.settimeout(REFUSED_LINGER)
        sock.sendall(OVERLOADED)
        sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + REFUSED_LINGER
        while time.monotonic() < end:  # the client reads the answer, then closes: its EOF
            sock.settimeout(max(end - time.monotonic(), 0.001))
            if not sock.recv(4096):
                break
    except OSError:  # a timeout, a reset: the client is gone or too slow
        pass
