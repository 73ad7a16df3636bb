"""Sans-IO rules: how many servers hold N sessions, where the next session goes, what a refusal teaches."""

from __future__ import annotations

import pytest

from openenv._core.servers import (
    NEW,
    WAIT,
    assign,
    check_max_servers,
    grow,
    limit_from,
    overcommitted,
    overcommitted_message,
    place,
    servers_needed,
)


@pytest.mark.parametrize(
    ("sessions", "limit", "cap", "expected"),
    [
        (3, 1, None, 3),  # one-session servers: one each
        (3, None, None, 3),  # a limit not known yet counts as one
        (8, 4, None, 2),
        (9, 4, None, 3),  # rounded up
        (8, 1, 4, 4),  # the cap wins (the sessions then share)
        (2, 16, 8, 1),
        (0, 1, 8, 0),
        (5, 0, None, 5),  # a nonsense limit counts as one
    ],
)
def test_servers_needed(sessions: int, limit: int | None, cap: int | None, expected: int) -> None:
    assert servers_needed(sessions, limit, cap) == expected


def test_sessions_share_servers_round_robin() -> None:
    assert assign(5, 2) == [0, 1, 0, 1, 0]
    assert assign(3, 3) == [0, 1, 2]
    with pytest.raises(ValueError):
        assign(1, 0)


def test_growing_starts_servers_up_to_the_cap_then_fills_the_least_loaded() -> None:
    assert grow([], 3, None) == [0, 1, 2]
    assert grow([], 5, 2) == assign(5, 2)
    assert grow([2, 1], 2, 2) == [1, 0]  # server 1 had room first, then the tie goes to the lowest index
    assert grow([1], 2, 3) == [1, 2]


def test_placing_the_next_session() -> None:
    assert place([], None, 8) == NEW
    assert place([3, 1], None, 8) == 1  # limit unknown: share the least loaded until a server says it is full
    assert place([1, 0], 1, 8) == 1  # a server with room
    assert place([1, 1], 1, 8) == NEW  # all full, under the cap
    assert place([1, 1], 1, None) == NEW
    assert place([1, 1], 1, 2) == WAIT  # all full at the cap
    assert place([2, 1], 2, 2) == 1


def test_the_limit_comes_from_the_capacity_error() -> None:
    assert limit_from({"active_sessions": 1, "max_sessions": 1}) == 1
    assert limit_from({"max_sessions": 4}) == 4
    assert limit_from({}) is None
    assert limit_from({"max_sessions": "4"}) is None
    assert limit_from({"max_sessions": True}) is None
    assert limit_from({"max_sessions": 0}) is None


def test_overcommitted_means_waiting_cannot_help() -> None:
    assert overcommitted(2, 1)
    assert not overcommitted(1, 1)  # someone else holds it: waiting may help
    assert not overcommitted(5, None)
    message = overcommitted_message(8, 4, 1, 4)
    assert "holds 1 session(s)" in message and "8 sessions on 4 server(s) (max_servers=4) put 2 on each" in message
    assert "pass max_servers=8" in message


def test_max_servers_is_checked() -> None:
    assert check_max_servers(None) is None
    assert check_max_servers(3) == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="max_servers must be a positive integer"):
            check_max_servers(bad)
