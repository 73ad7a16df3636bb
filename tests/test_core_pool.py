"""The sans-IO decisions of ``EnvPool`` (``_core/pool.py``): planning, autoreset, the queue, bookkeeping."""

from __future__ import annotations

import pytest

from openenv._core.errors import ExecutionError, SessionBusy
from openenv._core.pool import Completed, JobKind, PoolCore
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


def test_taking_sessions_is_atomic_across_threads() -> None:
    import threading

    core = _core(2)
    # a session checked out between a call's check and its queueing: claim() refuses it, queueing nothing
    assert core.checkout() == 0
    step = core.plan_step([0, 1], [{}, {}])
    with pytest.raises(SessionBusy):
        core.claim([0, 1], step)
    assert not core.queue and core.slots[1].state is None
    core.claim([1], step[1:])
    assert core.slots[1].state == "queued"
    # checkout() takes the same lock: it waits while a claim is being made
    core.checkin(0)
    taken: list[int] = []
    with core._lock:
        thread = threading.Thread(target=lambda: taken.append(core.checkout()))
        thread.start()
        thread.join(0.2)
        assert thread.is_alive() and taken == []
    thread.join()
    assert taken == [0]
