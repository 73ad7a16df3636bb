"""The sync half of the per-side primitives (the async half is ``_shim_async``).

Same names and parameters as ``_shim_async``; nothing here imports asyncio.
"""

from __future__ import annotations

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


def run_all(calls: Sequence[Callable[[], T]]) -> list[T | BaseException]:
    """Run the calls concurrently (in worker threads); return each one's result or exception, in order.

    Used to open or close many sessions at once (handshakes, provider stops);
    the threads end before it returns.
    """
    if len(calls) <= 1:
        return [_outcome(call) for call in calls]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(len(calls), 32), thread_name_prefix="openenv-pool") as executor:
        futures = [executor.submit(_outcome, call) for call in calls]
        return [future.result() for future in futures]


def _outcome(call: Callable[[], T]) -> T | BaseException:
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - returned to the caller, which decides
        return exc
