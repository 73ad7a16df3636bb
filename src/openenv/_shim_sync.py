"""The sync half of the per-side primitives (the async half is ``_shim_async``).

Same names and parameters as ``_shim_async``; nothing here imports asyncio.
"""

from __future__ import annotations

import errno
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from websockets.protocol import CLOSED
from websockets.sync.client import ClientConnection as WebSocket
from websockets.sync.client import connect as _connect

__all__ = [
    "WebSocket",
    "sleep",
    "run_blocking",
    "run_cleanup",
    "run_settled",
    "run_all",
    "ws_connect",
    "ws_recv",
    "ws_abandon",
    "ws_pending",
    "loop_token",
    "run_to_completion",
    "ws_wait_any",
    "new_lock",
    "current_loop",
    "callable_from_threads",
    "run_all",
]

T = TypeVar("T")


def sleep(seconds: float) -> None:
    """Sleep."""
    time.sleep(seconds)


def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (directly: there is no event loop to protect)."""
    return fn(*args, **kwargs)


def run_settled(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (directly: it always runs to its end)."""
    return fn(*args, **kwargs)


def run_cleanup(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking teardown."""
    return fn(*args, **kwargs)


def run_all(
    calls: Sequence[Callable[[], T]], on_interrupt: Callable[[], Any], limit: int | None = None
) -> list[T | BaseException]:
    """Run zero-argument functions at once; return each one's result, or the exception it raised, in order.

    The calls run in threads, one per call (with ``limit``, that many threads
    at most, each taking the next call not begun, in order); every thread has
    ended when this returns (a single call runs in the calling thread).  If
    the caller is interrupted meanwhile (Ctrl-C), the calls not yet begun are
    dropped, ``on_interrupt()`` runs (it must make the running calls end, for
    example by stopping what they wait on), the threads are joined, and the
    interrupt propagates.
    """
    if len(calls) == 1:
        try:
            return [calls[0]()]
        except Exception as exc:
            return [exc]
    if not calls:
        return []
    batch = _Batch(calls)
    width = len(calls) if limit is None else max(1, min(limit, len(calls)))
    runs: list[_Run] = []
    try:
        # each thread is known before it starts: a Ctrl-C inside Thread.start() (it waits for the new
        # thread to run, slow on a loaded machine) still finds it to join, where a ThreadPoolExecutor
        # records its thread only after start() returns and so left one running past this call
        for _ in range(width):
            run = _Run(batch)
            runs.append(run)
            run.thread.start()
        for run in runs:  # in short slices: a pending Ctrl-C is handled between them
            while not run.ended.wait(0.1):
                pass
    except BaseException:
        batch.cancelled = True  # a call not begun yet is dropped
        try:
            on_interrupt()
        finally:  # (a second Ctrl-C in on_interrupt: the threads are joined all the same)
            for run in runs:
                run.join()
        raise
    for run in runs:
        run.join()
    return batch.outcomes


class _Batch(Generic[T]):
    """The calls of one ``run_all``, taken in order by its threads, and their outcomes."""

    def __init__(self, calls: Sequence[Callable[[], T]]) -> None:
        self._calls = list(calls)
        self._next = 0
        self._lock = threading.Lock()
        self.cancelled = False
        self.outcomes: list[T | BaseException] = [RuntimeError("not run")] * len(self._calls)

    def work(self) -> None:
        """Run the next call not begun, until none is left or the batch is cancelled."""
        while True:
            with self._lock:
                if self.cancelled or self._next == len(self._calls):
                    return
                index = self._next
                self._next += 1
            try:
                self.outcomes[index] = self._calls[index]()
            except BaseException as exc:
                self.outcomes[index] = exc


class _Run:
    """One thread of ``run_all``: it runs calls of its batch until none is left."""

    def __init__(self, batch: _Batch[Any]) -> None:
        self.batch = batch
        self.began, self.ended = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._main, name="openenv-run-all", daemon=True)

    def _main(self) -> None:
        self.began.set()
        try:
            self.batch.work()
        finally:
            self.ended.set()

    def join(self) -> None:
        """Wait for the call to end (uninterrupted: what it holds must not outlive ``run_all``)."""
        # a start() that a Ctrl-C cut short may have started the thread or not: one that runs
        # says so at once; one that never started never will (a short, bounded wait)
        if self.began.wait(2.0):
            self.ended.wait()
            self.thread.join()


def ws_connect(url: str, on_connection: Callable[[WebSocket], Any] | None = None, **options: Any) -> Any:
    """A WebSocket connection to enter with ``enter_context`` (websockets' client with `_Connection`'s fixes).

    ``on_connection(ws)`` is called with the connection once its TCP (and TLS)
    connection is up, before the handshake: a ``ws_abandon(ws)`` from another
    thread then ends the handshake at once.
    """
    base = options.pop("create_connection", _Connection)
    if on_connection is None:
        options["create_connection"] = base
    else:

        def create(*args: Any, **kwargs: Any) -> WebSocket:
            ws: WebSocket = base(*args, **kwargs)
            on_connection(ws)
            return ws

        options["create_connection"] = create
    return _connect(url, **options)


# ------------------------------------------------------------------ TLS
#
# websockets' threaded client reads in its own thread (``recv_events``) while
# the caller's thread writes (the HTTP upgrade, then frames), both on one
# ``ssl.SSLSocket``, that is on one OpenSSL ``SSL`` object, which is not
# thread-safe.  With TLS 1.3 the server sends its session tickets right after
# the handshake: while the reader thread's ``SSL_read`` processes them,
# OpenSSL's state machine is "in init", and the ``SSL_write`` of the HTTP
# upgrade running at the same moment in the other thread enters that state
# machine too.  About one connect in 100 to 300 here lost its upgrade request:
# the server never saw it, the client waited ``connect_timeout``, and on
# websockets 17 longer (its reader, blocked in ``SSL_read`` after a record that
# held only tickets, cannot be woken by ``close_socket()``; it waited for the
# server's handshake timeout).  ``_SerialisedTls`` keeps the socket
# non-blocking and runs every ``SSL_read``/``SSL_write`` under one lock, waiting
# for readiness outside it, so reads and writes never overlap and a read never
# blocks.

#: Bytes handed to one ``SSL_write`` (one TLS record at most).
_TLS_CHUNK = 16384


def _wait_fd(fd: int, write: bool, timeout: float | None) -> bool:
    """Wait until ``fd`` is readable (writable when ``write``), closed or in error; ``False`` on timeout."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLOUT if write else select.POLLIN)
        return bool(poller.poll(None if timeout is None else max(timeout, 0.0) * 1000))
    ready = select.select([] if write else [fd], [fd] if write else [], [fd], timeout)  # pragma: no cover
    return any(ready)  # pragma: no cover


class _SerialisedTls:
    """An ``ssl.SSLSocket`` whose reads and writes never run at the same time.

    What websockets' sync connection calls (``recv``, ``sendall``,
    ``settimeout``, ``shutdown``, ``close``, ``fileno``, ...) with a plain
    socket's meaning; the timeout set by ``settimeout`` is kept here (the real
    socket stays non-blocking) and applies to each call.
    """

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._sock = sock
        self._io = threading.Lock()
        self._timeout = sock.gettimeout()
        self._closed = False
        sock.setblocking(False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def fileno(self) -> int:
        return self._sock.fileno()

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def gettimeout(self) -> float | None:
        return self._timeout

    def _deadline(self) -> float | None:
        return None if self._timeout is None else time.monotonic() + self._timeout

    def _wait(self, write: bool, deadline: float | None) -> None:
        if self._closed:
            raise OSError(errno.EBADF, "Bad file descriptor")
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0 or not _wait_fd(self._sock.fileno(), write, left):
            raise TimeoutError("timed out")

    def recv(self, bufsize: int) -> bytes:
        deadline = self._deadline()
        while True:
            with self._io:
                try:
                    data = self._sock.recv(bufsize)
                    while data and len(data) < bufsize and self._sock.pending():  # decrypted, not yet read
                        data += self._sock.recv(bufsize - len(data))
                    return data
                except ssl.SSLWantReadError:
                    write = False  # a record without application data (tickets), or half a record
                except ssl.SSLWantWriteError:
                    write = True
            self._wait(write, deadline)

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        deadline = self._deadline()
        while view:
            chunk = view[:_TLS_CHUNK]  # after a "want", OpenSSL needs the same bytes again
            with self._io:
                try:
                    view = view[self._sock.send(chunk) :]
                    continue
                except ssl.SSLWantWriteError:
                    write = True
                except ssl.SSLWantReadError:
                    write = False
            self._wait(write, deadline)

    def shutdown(self, how: int) -> None:
        with self._io:
            self._sock.shutdown(how)

    def close(self) -> None:
        self._closed = True
        with self._io:
            try:  # wakes a recv or sendall waiting for the socket
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()


class _Connection(WebSocket):
    """websockets' sync client connection, fixed for three races it has with a server that refuses early.

    * TLS: the socket is a `_SerialisedTls` (see above).
    * A server that answers and closes before the upgrade request is written
      (an overloaded `EnvServer` answers ``503`` without reading the request)
      made the handshake fail on an internal ``assert`` of websockets (the
      reader thread had already set its close deadline): the handshake now
      raises what the answer means (``InvalidStatus`` with the ``503``).
    * Ctrl-C (any ``BaseException`` that is no ``Exception``) during the
      handshake closed nothing: the socket and its reader thread now end with it.
    * The reader thread's last write, after the handshake thread had closed
      the socket, was logged as an "unexpected internal error" (``Bad file
      descriptor``, ``Broken pipe``): with the connection already closed there
      is nothing left to write, and the error is dropped.
    """

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        if isinstance(sock, ssl.SSLSocket):
            sock = _SerialisedTls(sock)  # type: ignore[assignment]
        super().__init__(sock, *args, **kwargs)

    def handshake(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().handshake(*args, **kwargs)
        except AssertionError:
            refused = self.protocol.handshake_exc  # set with the early answer (or the early close)
            if refused is None:
                raise
            raise refused from None
        except BaseException as exc:
            if not isinstance(exc, Exception):
                # Ctrl-C mid-handshake: websockets' connect() closes the socket after an Exception only,
                # so the socket and its reader thread would outlive the call (and close())
                self.close_socket()
            raise

    def send_data(self) -> None:
        try:
            super().send_data()
        except OSError:
            closed = self.protocol.state is CLOSED
            if not (closed and threading.current_thread() is getattr(self, "recv_events_thread", None)):
                raise


def ws_recv(ws: WebSocket, timeout: float | None) -> Any:
    """Receive one message; ``TimeoutError`` after ``timeout`` seconds."""
    return ws.recv(timeout=timeout)


def ws_pending(ws: WebSocket) -> bool:
    """Whether a message arrived that no call has read yet (a reply nobody asked for).

    Only meaningful between requests of one-request-at-a-time protocols; a
    closed connection reports ``False`` (the next call learns why it closed).
    """
    assembler = getattr(ws, "recv_messages", None)
    frames = getattr(assembler, "frames", None)
    if frames is None or getattr(assembler, "closed", True):
        return False
    return not frames.empty()


def ws_abandon(ws: WebSocket) -> None:
    """Drop a connection at once, without a closing handshake."""
    try:
        ws.close_socket()
    except Exception:
        pass


def loop_token() -> object:
    """Identifies the running event loop; there is none on this side."""
    return None


def run_to_completion(fn: Callable[[], Any]) -> None:
    """Call a zero-argument function from plain code (``atexit``); the async side runs it on a fresh event loop."""
    fn()


def _ws_ready(ws: WebSocket) -> bool:
    """Whether ``recv`` would return at once: a message is buffered, or the connection is closed.

    Unknown websockets internals count as ready (the caller's ``recv`` then waits).
    """
    assembler = getattr(ws, "recv_messages", None)
    frames = getattr(assembler, "frames", None)
    if frames is None or getattr(assembler, "closed", True):
        return True
    return not frames.empty()


def ws_wait_any(sockets: Sequence[WebSocket], timeout: float | None) -> set[int]:
    """Wait until at least one of ``sockets`` has a message to read (or is closed).

    Returns the positions of every such socket; an empty set when ``timeout``
    seconds passed first (``None``: no limit).  Nothing is read.  It polls
    websockets' receive buffers (filled by its reader threads) with a growing
    sleep, 50 µs to 2 ms: no thread of its own.
    """
    end = None if timeout is None else time.monotonic() + timeout
    delay = 0.00005
    while True:
        ready = {i for i, ws in enumerate(sockets) if _ws_ready(ws)}
        if ready or not sockets:
            return ready
        if end is not None:
            left = end - time.monotonic()
            if left <= 0:
                return ready
            delay = min(delay, left)
        time.sleep(delay)
        delay = min(delay * 2, 0.002)


# ---------------------------------------------------------------- TRL's async trainer (environment_factory)


def new_lock() -> Any:
    """A lock for ``with``: serialises the calls of one object (a thread lock; ``asyncio.Lock`` on the async side)."""
    return threading.Lock()


def current_loop() -> object | None:
    """No event loop runs on this side: ``None``."""
    return None


F = TypeVar("F", bound=Callable[..., Any])


def callable_from_threads(fn: F, no_loop: str) -> F:
    """``fn`` itself: a blocking method may be called from any thread (see the async side)."""
    return fn
