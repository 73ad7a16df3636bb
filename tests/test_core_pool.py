"""The sans-IO decisions of ``EnvPool`` (``_core/pool.py``): planning, autoreset, the queue, bookkeeping,
send times and due replies, overcommitted servers and replacements, all without a socket or a clock."""

from __future__ import annotations

import pytest

from openenv._core.errors import (
    CapacityReached,
    ConnectError,
    EnvClosed,
    ExecutionError,
    PoolError,
    SessionBusy,
    SessionLost,
)
from openenv._core.pool import (
    Completed,
    Job,
    JobKind,
    PoolCall,
    PoolCore,
    PoolLife,
    PoolOptions,
    ReplacePlan,
    check_replace_attempts,
    overcommit_error,
    pool_error,
    recv_unreplaced_message,
    session_urls,
    unreplaced_message,
)
from openenv._core.result import StepResult


def _core(size: int = 3, **kwargs: object) -> PoolCore:
    options = {"autoreset": False, "max_concurrency": None, "on_failure": "raise", **kwargs}
    return PoolCore(size, **options)  # type: ignore[arg-type]


def test_reset_plans_seeds_and_kwargs_per_session() -> None:
    core = _core()
    jobs = core.plan_reset([2, 0], 7, {"start": 1})
    assert [(j.index, j.kwargs) for j in jobs] == [(2, {"start": 1, "seed": 7}), (0, {"start": 1, "seed": 8})]
    jobs = core.plan_reset([0, 1], [None, 3], [{"a": 1}, None])
    assert [j.kwargs for j in jobs] == [{"a": 1}, {"seed": 3}]
    with pytest.raises(ValueError, match="one per session"):
        core.plan_reset([0, 1], [1], None)
    with pytest.raises(TypeError):
        core.plan_reset([0], "1", None)  # type: ignore[arg-type]


def test_one_action_where_a_list_is_due_is_named() -> None:
    core = _core()
    for one, shown in (({"message": "a"}, "a dict"), ("ab", "str"), (5, "int")):
        with pytest.raises(TypeError) as info:
            core.plan_step([0, 1], one)  # type: ignore[arg-type]
        assert str(info.value) == (
            f"actions must be a list with one action per session (2), not {shown}: "
            "pool.step([action] * 2) sends the same action to every session"
        )
    # any iterable of actions is still one per session
    assert [j.action for j in core.plan_step([0, 1], (a for a in ({"m": 1}, {"m": 2})))] == [{"m": 1}, {"m": 2}]  # type: ignore[arg-type]


def test_autoreset_and_failed_sessions_in_the_plan() -> None:
    core = _core(autoreset=True)
    step = core.plan_step([0, 1, 2], ["a", "b", "c"])
    core.enqueue(step)
    sent = core.sendable()
    core.settled(sent[0], StepResult({}, done=True), None)
    core.settled(sent[1], None, ExecutionError("boom", "EXECUTION_ERROR"))
    core.settled(sent[2], StepResult({}), None)
    kinds = [j.kind for j in core.plan_step([0, 1, 2], ["a", "b", "c"])]
    assert kinds == [JobKind.RESET, JobKind.FAILED, JobKind.STEP]
    assert "reset(ids=[1])" in str(core.failed_error(1))
    assert core.metrics([True] * 3).failures == 1 and core.metrics([True] * 3).active == 2


def test_the_queue_respects_max_concurrency() -> None:
    core = _core(size=4, max_concurrency=2)
    core.enqueue(core.plan_step([0, 1, 2, 3], [None] * 4))
    first = core.sendable()
    assert [j.index for j in first] == [0, 1] and core.sendable() == []
    assert (core.metrics([True] * 4).in_flight, core.metrics([True] * 4).queued) == (2, 2)
    with pytest.raises(SessionBusy):
        core.check_idle()
    core.settled(first[0], StepResult({}), None)
    assert [j.index for j in core.sendable()] == [2]


def test_checkout_resize_and_arguments() -> None:
    core = _core(size=2)
    assert core.checkout() == 0 and core.checkout() == 1
    with pytest.raises(SessionBusy, match="no free session"):
        core.checkout()
    with pytest.raises(SessionBusy, match="checked out"):
        core.check_free([1])
    core.checkin(1)
    core.resize(4)
    assert core.size == 4
    assert core.checkout() == 1
    with pytest.raises(SessionBusy):
        core.resize(1)  # session 1 is checked out
    with pytest.raises(ValueError):
        _core(max_concurrency=0)
    with pytest.raises(ValueError, match="duplicates"):
        core.ids([1, 1])
    assert Completed(0, None, None).ok and not Completed(0, None, ExecutionError("x", "E")).ok


def test_claim_checks_and_queues_in_one_step() -> None:
    core = _core(2)
    # a session checked out between a call's check and its queueing: claim() refuses it, queueing nothing
    assert core.checkout() == 0
    step = core.plan_step([0, 1], [{}, {}])
    with pytest.raises(SessionBusy):
        core.claim([0, 1], step)
    assert not core.queue and core.slots[1].state is None
    core.claim([1], step[1:])
    assert core.slots[1].state == "queued"


def test_the_core_takes_no_lock_and_reads_no_clock() -> None:
    # sans-IO: the IO layer that shares a pool between threads (checkout()) holds the lock, and passes the time in
    import openenv._core.pool as module

    assert not {"threading", "time", "monotonic"} & set(vars(module))
    assert not any("lock" in name.lower() for name in vars(_core()))


# -- in flight: send times, overdue replies, read timeouts (the clock is passed in) -------------------


def _sent(core: PoolCore, times: list[float]) -> list[Job]:
    core.enqueue(core.plan_step(list(range(len(times))), [{}] * len(times)))
    jobs = core.sendable()
    for job, at in zip(jobs, times, strict=True):
        core.sent(job, at)
    return jobs


def test_replies_fall_due_message_timeout_after_their_own_send() -> None:
    core = _core(3, message_timeout=2.5)
    jobs = _sent(core, [100.0, 100.5, 101.0])
    assert core.flying() == [0, 1, 2] and core.job(1) is jobs[1]
    assert core.overdue(102.4) == [] and core.next_due(102.4) == pytest.approx(0.1)
    assert core.overdue(103.0) == [0, 1] and core.next_due(103.0) == 0.0
    # a reply read late gets what is left of its own budget, never less than a millisecond
    assert core.read_timeout(2, 102.0) == pytest.approx(1.5)
    assert core.read_timeout(0, 200.0) == 0.001
    # waiting: the caller's bound, or less when a reply falls due first
    assert core.wait_for(101.0, None) == pytest.approx(1.5) and core.wait_for(101.0, 0.2) == 0.2
    core.settled(jobs[0], StepResult({}), None)
    assert core.flying() == [1, 2] and core.overdue(103.0) == [1]


def test_without_message_timeout_nothing_is_ever_overdue() -> None:
    core = _core(2)
    _sent(core, [0.0, 1.0])
    assert core.overdue(1e9) == [] and core.next_due(1e9) is None
    assert core.read_timeout(0, 1e9) is None and core.wait_for(5.0, None) is None and core.wait_for(5.0, 3.0) == 3.0
    assert _core(1, message_timeout=1.0).next_due(0.0) is None  # nothing in flight


def test_a_session_settled_or_unqueued_leaves_the_books() -> None:
    core = _core(3, max_concurrency=1, message_timeout=1.0)
    core.enqueue(core.plan_step([0, 1, 2], [{}] * 3))
    (job,) = core.sendable()
    core.sent(job, 0.0)
    assert [j.index for j in core.unqueue()] == [1, 2]
    core.settled(job, None, SessionLost("gone"))
    assert core.flying() == [] and core.metrics([True] * 3).in_flight == 0
    assert core.metrics([True] * 3).failures == 1


# -- a server that cannot hold the pool (the capacity waits: tests/test_core_capacity.py) -----------


def _full(**details: object) -> CapacityReached:
    return CapacityReached("at capacity", "CAPACITY_REACHED", dict(details))


def test_an_overcommitted_server_is_refused_at_once() -> None:
    full = _full(active_sessions=2, max_sessions=2)
    assert overcommit_error(full, ours=2, sessions=4, servers=None, max_servers=None) is None  # it fits: wait
    assert overcommit_error(_full(), ours=9, sessions=9, servers=None, max_servers=None) is None  # limit unknown
    given = overcommit_error(full, ours=3, sessions=3, servers=None, max_servers=None)
    assert given is not None and "holds 2 session(s) and this pool opens 3" in str(given)
    started = overcommit_error(full, ours=3, sessions=6, servers=2, max_servers=2)
    assert started is not None and "max_servers" in str(started) and started.details == full.details


# -- replacing failed sessions: attempts, backoff and the messages -------------------------------------


def test_a_replace_plan_tries_its_attempts_with_backoff_then_says_why() -> None:
    plan = ReplacePlan(2, 3, own_server=True)
    assert plan.next_try() == 0.0  # the first try at once
    plan.failed(ConnectError("refused"))
    assert plan.next_try() == 0.05
    plan.failed(SessionLost("gone"))
    assert plan.next_try() == 0.05
    plan.failed(ConnectError("refused again"))
    assert plan.next_try() is None
    error = plan.error()
    assert isinstance(error, PoolError) and error.results == {2: None}
    assert str(error.errors[2]) == "refused again"
    assert str(error).startswith("could not replace session 2 in 3 attempt(s): ConnectError: refused again")
    assert ReplacePlan(0, 1, own_server=False).next_try() == 0.0


def test_the_messages_of_sessions_not_replaced() -> None:
    unreplaced = {3: ReplacePlan(3, 1, own_server=False), 1: ReplacePlan(1, 1, own_server=False)}
    for plan in unreplaced.values():
        plan.next_try()
        plan.failed(ConnectError("down"))
    errors = {i: plan.error() for i, plan in unreplaced.items()}
    message = unreplaced_message(PoolCall.STEP, 2, 4, errors)
    assert message.startswith("step failed for 2 of 4 session(s) and 2 could not be replaced (indices [1, 3]); ")
    assert "session 1: could not replace session 1" in message and "replace(i)" in message
    assert "returned by the next recv()" in recv_unreplaced_message(errors)


def test_session_urls_and_replace_attempts_are_checked_before_anything_is_made() -> None:
    assert session_urls("ws://a", None) == ["ws://a"] and session_urls("ws://a", 3) == ["ws://a"] * 3
    assert session_urls(["ws://a", "ws://b"], None) == ["ws://a", "ws://b"] == session_urls(("ws://a", "ws://b"), 2)
    for base_url, size, message in [
        ("ws://a", 0, "positive"),
        ([], None, "empty"),
        (["ws://a"], 2, "one session per URL"),
    ]:
        with pytest.raises(ValueError, match=message):
            session_urls(base_url, size)
    check_replace_attempts(1)
    for attempts in (0, True, 1.5):
        with pytest.raises(ValueError, match="replace_attempts"):
            check_replace_attempts(attempts)  # type: ignore[arg-type]


def test_pool_options_are_checked_once_and_split_from_the_connection_options() -> None:
    options, rest = PoolOptions.split({"autoreset": True, "capacity_timeout": float("inf"), "message_timeout": 5.0})
    assert options == PoolOptions(autoreset=True, capacity_timeout=None)  # inf: no limit, as None
    assert rest == {"message_timeout": 5.0}
    given = PoolOptions(max_concurrency=2)
    assert PoolOptions.split({"headers": {}}, given) == (given, {"headers": {}})
    with pytest.raises(TypeError, match="not both: \\['autoreset'\\]"):
        PoolOptions.split({"autoreset": True}, given)
    with pytest.raises(TypeError, match="must be a PoolOptions"):
        PoolOptions.split({}, {"autoreset": True})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_failure must be one of"):
        PoolOptions(on_failure="retry")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrency must be a positive integer"):
        PoolOptions(max_concurrency=0)
    with pytest.raises(ValueError, match="replace_attempts must be a positive integer"):
        PoolOptions(replace_attempts=0)


def test_only_a_reset_call_waits_for_capacity_and_each_call_names_itself() -> None:
    assert [call for call in PoolCall if call.waits_for_capacity] == [PoolCall.RESET]
    errors = {1: SessionLost("gone")}
    assert pool_error(PoolCall.OPENING, [0, 1], {}, errors).startswith("opening failed for 1 of 2 session(s)")


def test_a_pools_life_refuses_calls_once_closed() -> None:
    life = PoolLife()
    assert (life.opened, life.closed) == (False, False)
    life.check_open()
    life.closed = True
    with pytest.raises(EnvClosed, match="this EnvPool is closed; create a new one"):
        life.check_open()
