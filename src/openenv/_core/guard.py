"""One request in flight per session, enforced the same way in both twins."""

from __future__ import annotations

import threading
from types import TracebackType

from .errors import SessionBusy

__all__ = ["InFlight"]


class InFlight:
    """A non-blocking guard: entering it while held raises [`SessionBusy`][openenv.sync.SessionBusy].

    It never waits, so it is safe inside coroutines (it cannot block the loop)
    and across threads.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise SessionBusy(
                "another call is already in flight on this session; one session "
                "carries one request at a time (use env.new_session() or another Env "
                "for concurrent work)"
            )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()

    @property
    def busy(self) -> bool:
        """Whether a call is in flight."""
        return self._lock.locked()
