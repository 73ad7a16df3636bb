"""Flavour helpers for the generated sync tests (the async twin's are in ``helpers_async``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def gather(*calls: Callable[[], Any], stagger: float = 0.1) -> list[Any]:
    """Run the calls concurrently in threads (each started ``stagger`` s after the previous one).

    Returns each call's result or the exception it raised, in order.
    """
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            results[index] = call()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            results[index] = exc

    threads = []
    for index, call in enumerate(calls):
        thread = threading.Thread(target=run, args=(index, call))
        thread.start()
        threads.append(thread)
        time.sleep(stagger)
    for thread in threads:
        thread.join(60)
    return results


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run a blocking call (the sync twin has no loop to keep serving: call it directly)."""
    return fn()


class Closer:
    """``close()`` run on another thread (see :func:`close_from_another_thread`)."""

    def __init__(self, close: Callable[[], None], delay: float) -> None:
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
            self._close()
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc
        if not self._done.wait(10):  # the call in flight should have ended when close() returned
            self.hung = True

    def finish(self) -> bool:
        """Call once the call in flight ended; whether it hung after close() returned."""
        self._done.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error
        return self.hung


def close_from_another_thread(close: Callable[[], None], delay: float = 0.3) -> Closer:
    """Call ``close`` after ``delay`` s from another thread."""
    return Closer(close, delay)


def assert_no_leaks(before: Any, timeout: float = 10.0) -> None:
    """Poll until nothing is left over from ``before`` (see ``tests/leaks.py``)."""
    from . import leaks

    leaks.assert_no_leaks(before, timeout)


def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until the server side caught up (a closed session frees its slot a moment later)."""
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.02)
