"""The sync half of the per-side primitives (the async half is ``_shim_async``).

Same names and parameters as ``_shim_async``; nothing here imports asyncio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
