"""Flavour helpers for the async tests (the sync twin's are in ``helpers_sync``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any


async def gather(*calls: Callable[[], Awaitable[Any]], stagger: float = 0.1) -> list[Any]:
    """Run the calls concurrently (each started ``stagger`` s after the previous one).

    Returns each call's result or the exception it raised, in order.
    """

    async def run(index: int, call: Callable[[], Awaitable[Any]]) -> Any:
        await asyncio.sleep(stagger * index)
        return await call()

    return list(await asyncio.gather(*(run(i, c) for i, c in enumerate(calls)), return_exceptions=True))


async def sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until the server side caught up (a closed session frees its slot a moment later)."""
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "condition never became true"
        await asyncio.sleep(0.02)


async def run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run a blocking call (a server's ``stop``) in a thread, so this loop keeps serving its sockets."""
    return await asyncio.to_thread(fn)


class Closer:
    """``close()`` run on another thread with its own event loop (see :func:`close_from_another_thread`)."""

    def __init__(self, close: Callable[[], Coroutine[Any, Any, None]], delay: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._close = close
        self._delay = delay
        self._done = threading.Event()
        self.hung = False
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        time.sleep(self._delay)
        try:
            asyncio.run(self._close())
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc
        if not self._done.wait(10):  # the call in flight should have ended when close() returned
            self.hung = True
            self._loop.call_soon_threadsafe(lambda: None)  # wake the loop: fail the test, do not hang it

    def finish(self) -> bool:
        """Call once the call in flight ended; whether it hung after close() returned."""
        self._done.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error
        return self.hung


def close_from_another_thread(close: Callable[[], Coroutine[Any, Any, None]], delay: float = 0.3) -> Closer:
    """Call ``close`` after ``delay`` s from another thread running its own event loop."""
    return Closer(close, delay)


async def assert_no_leaks(before: Any, timeout: float = 10.0) -> None:
    """``leaks.assert_no_leaks`` that keeps this event loop running (its transports close on it)."""
    import gc

    from . import leaks

    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        left = leaks.leaked(before)
        if not any(left.values()):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"left behind after {timeout} s: {left}")
        await asyncio.sleep(0.02)
