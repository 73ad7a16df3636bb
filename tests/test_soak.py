"""Short soak in the normal suite (``nox -s soak`` runs the long form): see tests/soak.py."""

from __future__ import annotations

import pytest

from .soak import ASYNC_SESSIONS, SYNC_THREADS, run


@pytest.mark.serial  # the suite's heaviest CPU user (48 sessions at full speed): it would starve other tests' timers
@pytest.mark.parametrize("asgi", [False, True], ids=["embedded", "asgi"])
def test_short_soak_no_cross_talk_no_leaks(asgi: bool) -> None:
    steps = 200
    report = run(steps, budget=120.0, asgi=asgi)
    print(report.table(steps))
    assert report.violations() == []
    assert report.steps == (ASYNC_SESSIONS + SYNC_THREADS) * steps
