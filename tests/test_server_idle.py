"""The idle timer both asyncio transports share (`openenv.server._idle`), on a bare event loop (no sockets)."""

from __future__ import annotations

import asyncio

from openenv.server._idle import IdleTimer


def test_the_timer_fires_once_when_quiet_and_never_during_a_call() -> None:
    async def main() -> None:
        fired: list[float] = []
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def on_idle() -> None:
            fired.append(loop.time())
            done.set()

        timer = IdleTimer(0.02, on_idle)
        timer.active()  # a call runs for 5 idle periods: not idleness
        await asyncio.sleep(0.1)
        assert fired == [] and not timer.fired
        timer.quiet()  # its reply is sent: the clock restarts now
        await asyncio.wait_for(done.wait(), 30)
        assert timer.fired and fired[0] >= timer.last + 0.02  # counted from the reply
        await asyncio.sleep(0.05)
        assert len(fired) == 1  # once
        timer.cancel()

    asyncio.run(main())


def test_a_cancelled_timer_never_fires() -> None:
    async def main() -> None:
        fired: list[bool] = []
        timer = IdleTimer(0.01, lambda: fired.append(True))
        timer.cancel()
        timer.cancel()  # twice is fine
        await asyncio.sleep(0.05)
        assert fired == [] and not timer.fired

    asyncio.run(main())
