"""Deadlines: they read the monotonic clock, so they live outside the sans-IO `_core`.

The backoff schedules are sans-IO (`openenv._core.capacity`: ``backoff``, and the one
capacity-wait policy); ``backoff`` is re-exported here for the polls that pair it with a ``Deadline``.
"""

from __future__ import annotations

import time

from .._core.capacity import backoff

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
