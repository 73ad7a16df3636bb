"""Deadlines and backoff schedules: reads the monotonic clock, so it lives outside the sans-IO `_core`."""

from __future__ import annotations

import time
from collections.abc import Iterator

__all__ = ["Deadline", "backoff"]


class Deadline:
    """A time budget: ``Deadline(5.0)`` expires five seconds from now; ``Deadline(None)`` never does."""

    __slots__ = ("_end", "timeout")

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._end = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` for no limit."""
        if self._end is None:
            return None
        return max(0.0, self._end - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the budget is spent."""
        return self._end is not None and time.monotonic() >= self._end

    def cap(self, seconds: float) -> float:
        """``seconds``, or less if the deadline comes first."""
        left = self.remaining()
        return seconds if left is None else min(seconds, left)


def backoff(first: float = 0.02, flat: int = 100, factor: float = 1.5, ceiling: float = 0.25) -> Iterator[float]:
    """Delays for polling: ``first`` for ``flat`` rounds (servers usually come up within
    a couple of seconds, and a coarse poll overshoots), then growing by ``factor`` up to ``ceiling``."""
    for _ in range(flat):
        yield first
    delay = first
    while True:
        delay = min(delay * factor, ceiling)
        yield delay
