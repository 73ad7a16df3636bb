"""Short soak in the normal suite (``nox -s soak`` runs the long form): see tests/soak.py."""

from __future__ import annotations

import pytest

from .soak import ASYNC_SESSIONS, SYNC_THREADS, run


# Not `serial`: it loads two processes (the clients' and the server's) at full speed for a few seconds, as many
# other tests do, and it checks nothing against a clock. A serial test stops every suite of a CI run until all
# their running tests end (interop's run for minutes), and CI ran this one on three legs.
@pytest.mark.parametrize("asgi", [False, True], ids=["embedded", "asgi"])
def test_short_soak_no_cross_talk_no_leaks(asgi: bool) -> None:
    steps = 200
    report = run(steps, budget=120.0, asgi=asgi)
    print(report.table(steps))
    assert report.violations() == []
    assert report.steps == (ASYNC_SESSIONS + SYNC_THREADS) * steps
