"""What both asyncio transports share (`openenv.server._aio` and `openenv.server.asgi`): the idle timer, and
the hand-back of a worker thread's result to the loop (`settle`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["IdleTimer", "settle"]


class IdleTimer:
    """Calls ``on_idle()`` once when a connection's client sent nothing for ``idle`` s while no call of it ran.

    One timer per connection (not one ``wait_for`` task and timer per frame):
    a message only stores the time (`active()`, then `quiet()` once its reply
    is sent), and the timer, when it fires early, re-arms itself for the
    remaining time.  It never fires while a call runs (between `active()` and
    `quiet()`); it is re-armed for ``idle`` seconds after that instead.  Made
    on the connection's event loop; `cancel()` it when the connection ends.
    """

    __slots__ = ("_idle", "_loop", "_on_idle", "_timer", "busy", "fired", "last")

    def __init__(self, idle: float, on_idle: Callable[[], object]) -> None:
        self._idle = idle
        self._on_idle = on_idle
        self._loop = asyncio.get_running_loop()
        #: the loop time of the connection's last reply (or of its start)
        self.last = self._loop.time()
        #: whether one of the connection's calls is running (the timer does not fire then)
        self.busy = False
        #: whether ``on_idle`` was called
        self.fired = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self.last + idle, self._check)

    def active(self) -> None:
        """A message arrived: its call runs from now until `quiet()`."""
        self.busy = True

    def quiet(self) -> None:
        """The call's reply is sent: the client has ``idle`` seconds from now for its next message."""
        self.busy = False
        self.last = self._loop.time()

    def _check(self) -> None:
        now = self._loop.time()
        due = self.last + self._idle
        if self.busy or now < due:
            self._timer = self._loop.call_at(max(due, now + self._idle) if self.busy else due, self._check)
            return
        self._timer = None
        self.fired = True
        self._on_idle()

    def cancel(self) -> None:
        """Stop the timer (the connection ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Complete ``future`` (on its loop) with a worker's ``result`` or ``error``; nothing if it was cancelled."""
    if future.done():  # the awaiting task was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
