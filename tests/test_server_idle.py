"""The idle timer both asyncio transports share (`openenv.server._idle`), on a bare event loop (no sockets).

The loop's clock is the test's: it moves only when the test moves it, so "the timer has not fired
by now" is a fact about the loop, not about how busy the machine is (no sleep decides anything).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from openenv.server._idle import IdleTimer


class _ManualClock(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` stands still until `advance` moves it (binary fractions: exact sums)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1024.0

    def time(self) -> float:
        return self.now

    async def advance(self, seconds: float) -> None:
        """Move the clock, then let every callback that is due by now run (a few loop passes: none is pending)."""
        self.now += seconds
        for _ in range(4):
            await asyncio.sleep(0)


def _run(main: Callable[[_ManualClock], Coroutine[Any, Any, None]]) -> None:
    loop = _ManualClock()
    try:
        loop.run_until_complete(main(loop))
    finally:
        loop.close()


def test_the_timer_fires_once_when_quiet_and_never_during_a_call() -> None:
    async def main(loop: _ManualClock) -> None:
        fired: list[float] = []
        timer = IdleTimer(0.25, lambda: fired.append(loop.time()))
        timer.active()  # a call runs for 8 idle periods: not idleness
        for _ in range(8):
            await loop.advance(0.25)
        assert fired == [] and not timer.fired
        timer.quiet()  # its reply is sent: the clock restarts now
        await loop.advance(0.125)
        assert fired == []
        await loop.advance(0.125)
        assert timer.fired and fired == [timer.last + 0.25]  # counted from the reply
        await loop.advance(10.0)
        assert len(fired) == 1  # once
        timer.cancel()

    _run(main)


def test_a_quiet_connection_is_idle_one_period_after_its_last_reply() -> None:
    async def main(loop: _ManualClock) -> None:
        fired: list[float] = []
        start = loop.time()
        timer = IdleTimer(0.5, lambda: fired.append(loop.time()))
        await loop.advance(0.25)
        timer.active()  # a message at 0.25, answered at once
        timer.quiet()
        await loop.advance(0.25)  # the first deadline (0.5) passes: re-armed for 0.75
        assert fired == []
        await loop.advance(0.25)
        assert fired == [start + 0.75]
        timer.cancel()

    _run(main)


def test_a_cancelled_timer_never_fires() -> None:
    async def main(loop: _ManualClock) -> None:
        fired: list[bool] = []
        timer = IdleTimer(0.125, lambda: fired.append(True))
        timer.cancel()
        timer.cancel()  # twice is fine
        await loop.advance(10.0)
        assert fired == [] and not timer.fired

    _run(main)
