"""The one capacity-wait policy (``_core/capacity.py``), without a socket or a clock.

The pool, ``environment_factory`` and the command line all wait through it: what is
waited for, the schedule, one budget per call, and the one "still full" message.
"""

from __future__ import annotations

import itertools

import pytest

from openenv._blocking import retry as blocking_retry
from openenv._core.capacity import (
    OVERLOADED_REMEDY,
    POOL_BUSY_REMEDY,
    SESSIONS_REMEDY,
    TOOLS_REMEDY,
    CapacityWait,
    backoff,
    capacity_delays,
    instances_remedy,
    still_full,
    waiting_note,
    waits_for_capacity,
)
from openenv._core.errors import CapacityReached, ConnectError, SessionBusy, SessionLost
from openenv._core.servers import RAISE_SESSION_LIMIT


def _full(**details: object) -> CapacityReached:
    return CapacityReached("at capacity.", "CAPACITY_REACHED", dict(details))


def _overloaded() -> ConnectError:
    error = ConnectError("server rejected WebSocket connection: HTTP 503")
    error.status = 503
    return error


def test_one_schedule_short_steps_then_doubling_to_a_two_second_ceiling() -> None:
    assert list(itertools.islice(capacity_delays(), 10)) == [0.05, 0.05, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    # the polls' generic schedule is the same function, re-exported by the IO layer that pairs it with a Deadline
    assert blocking_retry.backoff is backoff
    polls = backoff(first=0.1, flat=1, factor=3.0, ceiling=0.5)
    assert list(itertools.islice(polls, 4)) == pytest.approx([0.1, 0.3, 0.5, 0.5])


def test_only_a_full_or_overloaded_server_is_waited_for() -> None:
    assert waits_for_capacity(_full()) and waits_for_capacity(_overloaded())
    assert not waits_for_capacity(ConnectError("connection refused")) and not waits_for_capacity(None)
    retry = CapacityWait(None, now=0.0).retry()
    refused = ConnectError("connection refused")
    assert retry.after(refused, 0.0) is None and retry.final(refused) is refused  # raised unchanged
    lost = SessionLost("gone")
    assert retry.after(lost, 0.0) is None and retry.final(lost) is lost
    assert retry.after(_full(), 1e9) == 0.05  # no limit


def test_retries_back_off_within_one_shared_deadline() -> None:
    wait = CapacityWait(1.0, now=10.0)
    first, second = wait.retry(), wait.retry()  # two sessions of one call
    assert [first.after(_full(), 10.0) for _ in range(5)] == [0.05, 0.05, 0.05, 0.1, 0.2]
    assert second.after(_full(), 10.0) == 0.05  # its own backoff
    assert first.after(_full(), 10.9) == pytest.approx(0.1)  # capped by the shared deadline
    assert first.after(_full(), 11.0) is None and second.after(_full(), 12.0) is None  # the budget is spent
    assert wait.left(10.25) == pytest.approx(0.75) and wait.left(99.0) == 0.0
    assert CapacityWait(None, now=0.0).left(1e9) is None


def test_a_caller_that_found_no_room_itself_asks_for_a_delay() -> None:
    """Every server full, every pool session checked out: no error to classify, the same schedule and budget."""
    wait = CapacityWait(0.5, now=0.0)
    retry = wait.retry()
    assert [retry.delay(0.0) for _ in range(4)] == [0.05, 0.05, 0.05, 0.1]
    assert retry.delay(0.45) == pytest.approx(0.05) and retry.delay(0.5) is None
    wait.restart(10.0)  # a server started in between: the whole budget again
    assert retry.delay(10.0) == 0.4 and retry.delay(10.5) is None


def test_a_caller_that_lets_go_while_it_waits_spreads_its_delay() -> None:
    """Pools sharing a full server let go of their places while they wait: their retries must not come back in step."""
    retry = CapacityWait(10.0, now=0.0).retry()
    assert [retry.delay(0.0, spread=draw) for draw in (0.0, 0.5, 0.999)] == pytest.approx([0.025, 0.05, 0.07495])
    assert retry.delay(0.0, spread=0.5) == pytest.approx(0.1)  # the schedule goes on: 0.1 spread by one
    assert retry.delay(9.99, spread=0.99) == pytest.approx(0.01)  # never past the deadline
    assert retry.delay(10.0, spread=0.0) is None


def test_giving_up_says_how_long_it_waited_and_what_to_do() -> None:
    retry = CapacityWait(3.0, now=0.0).retry()
    final = retry.final(_full(active_sessions=4, max_sessions=4))
    assert isinstance(final, CapacityReached) and final.code == "CAPACITY_REACHED"
    assert final.details == {"active_sessions": 4, "max_sessions": 4}
    waited = "at capacity; still full after waiting capacity_timeout=3 s with backoff"
    assert final.message == f"{waited}. {SESSIONS_REMEDY}"
    still = retry.final(_overloaded())
    assert isinstance(still, ConnectError) and still.status == 503
    assert str(still) == (
        "server rejected WebSocket connection: HTTP 503; still overloaded after waiting capacity_timeout=3 s "
        f"with backoff. {OVERLOADED_REMEDY}"
    )
    busy = retry.final(SessionBusy("no free session in the pool of 2"), remedy=POOL_BUSY_REMEDY)
    assert isinstance(busy, SessionBusy)
    assert str(busy) == (
        "no free session in the pool of 2; still busy after waiting capacity_timeout=3 s with backoff. "
        "Make the pool at least as large as the number of instances (the generation batch size)"
    )


def test_every_caller_words_the_wait_the_same_way() -> None:
    """The pool, environment_factory (reset, reading tools) and the command line: one sentence, their remedy."""
    tools = still_full(_full(), 0.3, remedy=TOOLS_REMEDY, doing=" to read the environment's tools")
    assert str(tools) == (
        "at capacity; still full after waiting capacity_timeout=0.3 s with backoff to read the environment's "
        f"tools. Wait for its other clients, or {RAISE_SESSION_LIMIT} (code: CAPACITY_REACHED)"
    )
    cli = CapacityWait(0.3, now=0.0, option="--capacity-timeout").retry().final(_full(), remedy="")
    assert str(cli) == (
        "at capacity; still full after waiting --capacity-timeout=0.3 s with backoff (code: CAPACITY_REACHED)"
    )
    assert instances_remedy(4).startswith("Run fewer instances at once, raise max_servers (now 4), or raise ")
    assert "max_servers" not in instances_remedy(None)
    unbounded = still_full(_full(), None)
    assert str(unbounded).startswith("at capacity; still full after waiting capacity_timeout=None with backoff")
    assert waiting_note(_full(), 10.0) == (
        "the server is at capacity (at capacity): waiting up to 10 s for a session to come free (--capacity-timeout)"
    )


def test_a_zero_budget_raises_the_servers_own_answer() -> None:
    """Nothing was waited, so nothing is said about waiting (``--capacity-timeout 0`` fails at once)."""
    retry = CapacityWait(0.0, now=5.0).retry()
    full = _full()
    assert retry.after(full, 5.0) is None and retry.final(full) is full
