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
