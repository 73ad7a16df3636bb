"""The sync half of the per-side primitives (the async half is ``_shim_async``).

Same names and parameters as ``_shim_async``; nothing here imports asyncio.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from websockets.sync.client import ClientConnection as WebSocket
from websockets.sync.client import connect as _connect

__all__ = [
    "WebSocket",
    "sleep",
    "run_blocking",
    "run_cleanup",
    "run_all",
    "ws_connect",
    "ws_recv",
    "ws_abandon",
    "ws_pending",
    "loop_token",
    "run_to_completion",
    "ws_wait_any",
    "run_all",
]

T = TypeVar("T")


def sleep(seconds: float) -> None:
    """Sleep."""
    time.sleep(seconds)


def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (directly: there is no event loop to protect)."""
    return fn(*args, **kwargs)


def run_cleanup(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking teardown."""
    return fn(*args, **kwargs)


def run_all(calls: Sequence[Callable[[], T]], on_interrupt: Callable[[], Any]) -> list[T | BaseException]:
    """Run zero-argument functions at once; return each one's result, or the exception it raised, in order.

    Each call runs in a thread of a short-lived pool whose threads have all
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
    results: list[T | BaseException] = []
    if not calls:
        return results
    with concurrent.futures.ThreadPoolExecutor(len(calls), thread_name_prefix="openenv-run-all") as pool:
        futures = [pool.submit(call) for call in calls]
        try:
            # in short slices: a pending Ctrl-C is handled between them even when no real signal wakes the wait
            while concurrent.futures.wait(futures, timeout=0.1).not_done:
                pass
        except BaseException:
            for future in futures:
                future.cancel()
            on_interrupt()
            raise  # leaving the block joins the threads
    for future in futures:
        error = future.exception()
        results.append(error if error is not None else future.result())
    return results


def ws_connect(url: str, **options: Any) -> Any:
    """A WebSocket connection to enter with ``enter_context``."""
    return _connect(url, **options)


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
