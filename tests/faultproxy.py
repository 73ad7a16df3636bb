"""A loopback TCP proxy with faults the test controls (no dependency, one thread per direction).

    proxy = FaultProxy(server.port)          # listens on 127.0.0.1:proxy.port
    env = Env(proxy.url)
    proxy.delay = 0.02                        # every chunk, both ways, waits 20 ms
    proxy.cut("rst", after=1000)              # the next server->client chunk: forward 1000 bytes, then RST
    proxy.blackhole = True                    # forward nothing more (new connections: accepted, never answered)
    proxy.drop()                              # close every connection open now (the server went away)
    proxy.close()

Faults apply to traffic from the moment they are set; ``connections`` counts
accepted client connections, ``open_connections()`` the ones still open.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Literal


class FaultProxy:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>`` with injectable faults."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.delay = 0.0
        self.blackhole = False
        self._cut: tuple[Literal["fin", "rst"], int] | None = None
        self.cuts = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket | None]] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._start(self._accept_loop, "faultproxy-accept")

    # -- control -----------------------------------------------------------------

    def cut(self, how: Literal["fin", "rst"], after: int = 0) -> None:
        """Cut the next server->client chunk after ``after`` bytes: ``fin`` (shutdown) or ``rst`` (SO_LINGER 0)."""
        self._cut = (how, after)

    def drop(self) -> None:
        """Close every connection open now, both sides (as a server that went away); new ones are accepted."""
        with self._lock:
            pairs = list(self._pairs)
        for client, upstream in pairs:
            for sock in (client, upstream):
                if sock is not None:
                    _close(sock)

    def open_connections(self) -> int:
        with self._lock:
            return sum(1 for client, _ in self._pairs if client.fileno() != -1)

    def close(self) -> None:
        """Stop accepting, close every socket, join every thread."""
        self._closed = True
        try:  # wakes the accept loop (close() alone leaves a thread blocked in accept() there, on Linux)
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self.drop()
        for thread in list(self._threads):
            thread.join(5)

    # -- internals ---------------------------------------------------------------

    def _start(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            if self.blackhole:
                with self._lock:
                    self._pairs.append((client, None))
                self._start(self._swallow, "faultproxy-hole", client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            self._start(self._pump, "faultproxy-c2s", client, upstream, False)
            self._start(self._pump, "faultproxy-s2c", upstream, client, True)

    def _swallow(self, client: socket.socket) -> None:
        try:
            while client.recv(65536):
                pass
        except OSError:
            pass
        _close(client)

    def _pump(self, src: socket.socket, dst: socket.socket, to_client: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                if self.blackhole:
                    continue  # swallowed: the peer waits for ever (or until its timeout)
                cut = self._cut if to_client else None
                if cut is not None:
                    self._cut = None
                    how, after = cut
                    if after:
                        dst.sendall(data[:after])
                    self.cuts += 1
                    if how == "rst":
                        dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        # wake the other pump blocked in recv() on this socket first: the kernel
                        # sends the RST only when the last user of the socket lets go of it
                        try:
                            dst.shutdown(socket.SHUT_RD)
                        except OSError:
                            pass
                        dst.close()
                    else:
                        dst.shutdown(socket.SHUT_WR)
                    _close(src)
                    return
                dst.sendall(data)
        except OSError:
            pass
        # one side ended: pass the end on (half-close), the other pump finishes the pair
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if not to_client:
            if dst.fileno() == -1:  # the server side is gone already (a cut): nothing more to pass on
                _close(src)
            return
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
