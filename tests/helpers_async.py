"""Flavour helpers for the async tests (the sync twin's are in ``helpers_sync``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
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
