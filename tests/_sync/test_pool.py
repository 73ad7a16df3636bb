# GENERATED from tests/_async/test_pool.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``EnvPool`` against real servers on 127.0.0.1 (written once, generated for the sync twin)."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from openenv._sync.providers import ProcessProvider
from openenv.sync import (
    BootstrapError,
    CapacityReached,
    Completed,
    ConnectError,
    ConnectTimeout,
    Env,
    EnvClosed,
    EnvPool,
    ExecutionError,
    InvalidAction,
    MessageTimeout,
    PoolError,
    PoolMetrics,
    PoolOptions,
    SessionBusy,
    SessionLost,
)

from ..envs import IN_TIME, TOO_LATE, PeakEnv
from ..helpers_sync import gather, sleep, until
from ..leaks import alive, servers_in


def test_reset_and_step_keep_each_session_in_its_place(server_factory: Any) -> None:
    server = server_factory(max_sessions=4)
    with EnvPool(server.url, size=4) as pool:
        assert len(pool) == 4 and len(pool.envs) == 4
        results = pool.reset(seed=[10, 11, 12, 13], kwargs=[{"start": i} for i in range(4)])
        assert [r.observation["note"] for r in results] == ["seed=10", "seed=11", "seed=12", "seed=13"]
        assert [r.observation["count"] for r in results] == [0, 1, 2, 3]
        results = pool.step([{"delta": 10 * i} for i in range(4)])
        assert [r.observation["count"] for r in results] == [0, 11, 22, 33]
        # a subset, in the caller's order; one dict of kwargs for all; an int seed counts up
        results = pool.reset(seed=5, ids=[3, 1], kwargs={"start": 7})
        assert [(r.observation["note"], r.observation["count"]) for r in results] == [("seed=5", 7), ("seed=6", 7)]
        results = pool.step([{"delta": 1}, {"delta": 2}], ids=[1, 3])
        assert [r.observation["count"] for r in results] == [8, 9]
        assert pool.metrics == PoolMetrics(
            size=4, active=4, in_flight=0, queued=0, failures=0, replacements=0, checked_out=0
        )
        with pytest.raises(ValueError, match="one per session"):
            pool.step([{"delta": 1}])
        with pytest.raises(TypeError, match=r"^actions must be a list with one action per session \(4\), not a dict"):
            pool.step({"delta": 1})  # type: ignore[arg-type]
        with pytest.raises(IndexError):
            pool.step([{"delta": 1}], ids=[4])
    until(lambda: server.active_sessions == 0)


def test_steps_run_concurrently_on_the_server() -> None:
    from openenv.server import EnvServer

    PeakEnv.peak = 0
    with EnvServer(PeakEnv, host="127.0.0.1", port=0, max_sessions=4) as server:
        with EnvPool(server.url, size=4) as pool:
            pool.reset()
            pool.step([{"delta": 1, "sleep": TOO_LATE}] * 4)
    assert PeakEnv.peak == 4  # all four were running at once: sent before any reply was read


def test_max_concurrency_caps_requests_in_flight() -> None:
    from openenv.server import EnvServer

    PeakEnv.peak = 0
    with EnvServer(PeakEnv, host="127.0.0.1", port=0, max_sessions=5) as server:
        with EnvPool(server.url, size=5, max_concurrency=2) as pool:
            pool.reset()
            results = pool.step([{"delta": i, "sleep": 0.5} for i in range(5)])
            assert [r.observation["count"] for r in results] == [0, 1, 2, 3, 4]
            assert PeakEnv.peak == 2
            pool.send([{"delta": 1, "sleep": 0.5}] * 5)
            metrics = pool.metrics
            assert (metrics.in_flight, metrics.queued) == (2, 3)
            done: list[Completed[Any]] = []
            while len(done) < 5:
                done += pool.recv(min_results=1)
            assert sorted(c.index for c in done) == [0, 1, 2, 3, 4]
            assert pool.metrics.in_flight == pool.metrics.queued == 0
    assert PeakEnv.peak == 2


def test_the_pools_options_as_one_object_run_the_pool() -> None:
    from openenv.server import EnvServer

    PeakEnv.peak = 0
    options = PoolOptions(max_concurrency=1, capacity_timeout=float("inf"))
    with EnvServer(PeakEnv, host="127.0.0.1", port=0, max_sessions=3) as server:
        with EnvPool(server.url, size=3, pool_options=options) as pool:
            assert pool.pool_options is options and options.capacity_timeout is None  # inf: no limit
            pool.reset()
            results = pool.step([{"delta": i, "sleep": 0.2} for i in range(3)])
            assert [r.observation["count"] for r in results] == [0, 1, 2]
        assert PeakEnv.peak == 1  # the object's max_concurrency, not the default (no limit)
        assert EnvPool(server.url, max_concurrency=2).pool_options == PoolOptions(max_concurrency=2)
        with pytest.raises(TypeError, match=r"not both: \['autoreset'\]"):
            EnvPool(server.url, pool_options=options, autoreset=True)
        with pytest.raises(TypeError, match="unexpected keyword argument 'autorest' \\(did you mean 'autoreset'\\?\\)"):
            EnvPool(server.url, autorest=True)  # type: ignore[call-arg]


def test_send_and_recv_return_the_fast_sessions_first(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=3) as pool:
        pool.reset()
        slow = {"sleep": TOO_LATE}  # the fast session's two replies come first, even on a loaded machine
        pool.send([{"delta": 1, **slow}, {"delta": 2}, {"delta": 3, **slow}])
        with pytest.raises(SessionBusy):
            pool.step([{"delta": 1}] * 3)  # replies are outstanding
        first = pool.recv(min_results=1)
        assert [c.index for c in first] == [1]
        assert first[0].ok and first[0].result is not None and first[0].result.observation["count"] == 2
        pool.send([{"delta": 5}], ids=[1])  # session 1 goes on while the others still run
        rest = pool.recv(min_results=3)
        assert sorted(c.index for c in rest) == [0, 1, 2]
        counts = {c.index: c.result.observation["count"] for c in rest if c.result is not None}
        assert counts == {0: 1, 1: 7, 2: 3}
        assert pool.recv() == []  # nothing outstanding
        pool.send([{"delta": 1, "sleep": TOO_LATE}], ids=[0])
        assert pool.recv(timeout=0.05) == []  # nothing arrived in time
        assert [c.index for c in pool.recv()] == [0]


def test_step_async_is_a_deprecated_alias_of_send(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=2) as pool:
        pool.reset()
        with pytest.warns(DeprecationWarning, match=r"EnvPool\.send\(\)"):
            pool.step_async([{"delta": 4}], ids=[1])
        [done] = pool.recv()
        assert done.index == 1 and done.result is not None and done.result.observation["count"] == 4


def test_autoreset_resets_a_finished_session_on_its_next_step(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=2, autoreset=True) as pool:
        pool.reset()
        results = pool.step([{"delta": 10}, {"delta": 1}])
        assert [r.done for r in results] == [True, False]
        results = pool.step([{"delta": 3}, {"delta": 1}])
        # session 0 was reset instead (its action ignored): the reset's result
        assert results[0].observation["count"] == 0 and results[0].done is False
        assert results[0].observation["note"] == "seed=None"
        assert results[1].observation["count"] == 2
        results = pool.step([{"delta": 3}, {"delta": 1}])
        assert [r.observation["count"] for r in results] == [3, 3]


def test_without_autoreset_a_finished_session_is_stepped(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=1) as pool:
        pool.reset()
        assert (pool.step([{"delta": 10}]))[0].done
        assert (pool.step([{"delta": 1}]))[0].observation["count"] == 11


def test_a_failing_session_does_not_hide_the_others(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=3) as pool:
        pool.reset()
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1}, {"delta": 99}, {"delta": 2}])
        assert set(info.value.errors) == {1}
        assert isinstance(info.value.errors[1], ExecutionError)
        assert info.value.results[1] is None
        assert [r.observation["count"] for r in info.value.results.values() if r is not None] == [1, 2]
        assert "indices [1]" in str(info.value)
        assert pool.metrics.failures == 1 and pool.metrics.active == 2
        # the failed session stays failed (nothing sent) until it is reset
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1}] * 3)
        assert isinstance(info.value.errors[1], SessionLost)
        assert "reset(ids=[1])" in str(info.value.errors[1])
        assert [r.observation["count"] for r in info.value.results.values() if r is not None] == [2, 3]
        assert (pool.reset(ids=[1]))[0].observation["count"] == 0
        results = pool.step([{"delta": 1}] * 3)
        assert [r.observation["count"] for r in results] == [3, 1, 4]
        assert pool.metrics.active == 3
        # an action the codec refuses: nothing is sent anywhere
        with pytest.raises(InvalidAction):
            pool.step([{"delta": 1}, {"delta": 1}, {"delta": 1, "bad": object()}])
        assert [r.observation["count"] for r in pool.step([{"delta": 0}] * 3)] == [3, 1, 4]


def test_pool_error_keys_results_and_errors_by_pool_index(counter_server: Any) -> None:
    """``ids`` in any order: ``results`` and ``errors`` both answer ``[i]`` for session ``i``, in the call's order."""
    with EnvPool(counter_server.url, size=3) as pool:
        pool.reset()
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 5}, {"delta": 99}], ids=[2, 0])
        assert list(info.value.results) == [2, 0] and list(info.value.errors) == [0]
        assert info.value.results[0] is None and isinstance(info.value.errors[0], ExecutionError)
        result = info.value.results[2]
        assert result is not None and result.observation["count"] == 5


def test_a_timed_out_session_is_reported_and_the_others_come_back(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=3, message_timeout=IN_TIME) as pool:
        pool.reset()
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1}, {"delta": 1, "sleep": TOO_LATE}, {"delta": 1}])
        assert isinstance(info.value.errors[1], MessageTimeout)
        assert {i: r is None for i, r in info.value.results.items()} == {0: False, 1: True, 2: False}
        # recv reports a timeout as a completion (never waits past message_timeout)
        pool.reset(ids=[1])
        pool.send([{"delta": 1, "sleep": TOO_LATE}], ids=[1])
        (done,) = pool.recv()
        assert done.index == 1 and isinstance(done.error, MessageTimeout) and not done.ok


def test_a_dead_server_fails_only_its_session(server_factory: Any) -> None:
    a, b = server_factory(max_sessions=1), server_factory(max_sessions=1)
    with EnvPool([a.url, b.url]) as pool:
        assert [env.base_url for env in pool.envs] == [a.url, b.url]
        pool.reset()
        b.stop()
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1}, {"delta": 1}])
        assert isinstance(info.value.errors[1], SessionLost)
        assert info.value.results[0] is not None and info.value.results[0].observation["count"] == 1


def test_a_step_on_sessions_lost_mid_episode_says_so_and_opens_nothing(server_factory: Any) -> None:
    """Sessions whose episode was lost (here, in a checkout) get ``SessionLost`` on the pool's next step.

    Two or more of them once went to the concurrent open of cold sessions, which reconnected them
    and stepped fresh server sessions that had no episode: the loss went unnoticed.
    """
    server = server_factory(max_sessions=4)
    with EnvPool(server.url, size=2, message_timeout=IN_TIME) as pool:
        pool.reset()
        with pool.checkout() as first, pool.checkout() as second:
            for env in (first, second):
                with pytest.raises(MessageTimeout):
                    env.step({"delta": 1, "sleep": TOO_LATE})
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1}, {"delta": 1}])
        assert sorted(info.value.errors) == [0, 1]
        assert all(isinstance(e, SessionLost) for e in info.value.errors.values()), info.value.errors
        # nothing was reopened for the step (the lost sessions end once their sleeping steps do)
        until(lambda: server.active_sessions == 0)
        results = pool.reset()  # a reset reopens them, together
        assert [r.observation["count"] for r in results] == [0, 0]


def test_replace_by_hand_and_automatically(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=2) as pool:
        pool.reset()
        with pytest.raises(PoolError):
            pool.step([{"delta": 99}, {"delta": 1}])
        old = pool.envs[0]
        result = pool.replace(0)
        assert result.observation["count"] == 0
        assert pool.envs[0] is not old and old.closed
        assert pool.metrics.replacements == 1 and pool.metrics.active == 2
        assert [r.observation["count"] for r in pool.step([{"delta": 2}, {"delta": 2}])] == [2, 3]

    with EnvPool(counter_server.url, size=3, on_failure="replace") as pool:
        pool.reset(kwargs={"start": 5})
        results = pool.step([{"delta": 1}, {"delta": 99}, {"delta": 1}])
        # the failed session's slot holds the new episode's first result
        assert [r.observation["count"] for r in results] == [6, 0, 6]
        assert isinstance(pool.last_errors[1], ExecutionError)
        assert pool.metrics.replacements == 1 and pool.metrics.failures == 1
        pool.send([{"delta": 99}], ids=[2])
        (done,) = pool.recv()
        assert done.replaced and isinstance(done.error, ExecutionError)
        assert done.result is not None and done.result.observation["count"] == 0


def test_replacement_that_keeps_failing_raises(server_factory: Any) -> None:
    server = server_factory(max_sessions=1)
    pool = EnvPool(server.url, on_failure="replace", replace_attempts=2, capacity_timeout=0.2)
    with pool:
        pool.reset()
        server.stop()
        with pytest.raises(PoolError, match="could not replace session 0 in 2 attempt"):
            pool.step([{"delta": 1}])


def test_opening_waits_while_handshakes_are_refused_as_overloaded(server_factory: Any) -> None:
    """HTTP 503 from the pending-connection cap is retried with backoff like CAPACITY_REACHED (issue 21)."""
    from openenv.server.echo import EchoEnvironment

    # 16 handshakes at once against a cap of 1: most are refused with 503 at first
    server = server_factory(EchoEnvironment, max_sessions=16, max_pending=1)
    if server.transport == "threads":
        pytest.skip("the threading transport answers 503 before reading the request: its clients may see a reset")
    with EnvPool(server.url, size=16, capacity_timeout=60) as pool:
        assert len(pool.reset()) == 16
        results = pool.step([{"message": "hi"}] * 16)
        assert [r.observation["echoed_message"] for r in results] == ["hi"] * 16


def test_opening_waits_while_the_server_is_full(server_factory: Any) -> None:
    server = server_factory(max_sessions=2)
    blocker = Env(server.url).connect()
    pool = EnvPool(server.url, size=2, capacity_timeout=20)

    def open_pool() -> Any:
        return pool.connect()

    def free_a_slot() -> None:
        blocker.close()

    try:
        opened, _ = gather(open_pool, free_a_slot, stagger=0.5)
        assert opened is pool
        assert len(pool.reset()) == 2
    finally:
        pool.close()
        blocker.close()

    until(lambda: server.active_sessions == 0)  # the server frees slots just after the close handshake
    with Env(server.url), Env(server.url):
        full = EnvPool(server.url, capacity_timeout=0.3)
        with pytest.raises(CapacityReached, match="still full after waiting capacity_timeout=0.3 s"):
            with full:
                pass
        assert full.closed


def test_checkout_takes_a_session_out_and_gives_it_back(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=2) as pool:
        pool.reset()
        with pool.checkout() as env:
            assert env is pool.envs[0]
            assert (env.step({"delta": 4})).observation["count"] == 4
            assert pool.metrics.checked_out == 1
            with pytest.raises(SessionBusy, match="checked out"):
                pool.step([{"delta": 1}] * 2)
            assert (pool.step([{"delta": 1}], ids=[1]))[0].observation["count"] == 1
            with pool.checkout() as other:
                assert other is pool.envs[1]
                with pytest.raises(SessionBusy, match="no free session"):
                    with pool.checkout():
                        pass
        assert pool.metrics.checked_out == 0
        assert [r.observation["count"] for r in pool.step([{"delta": 1}] * 2)] == [5, 2]


def test_resize_up_and_down(server_factory: Any) -> None:
    server = server_factory(max_sessions=8)
    with EnvPool(server.url, size=2) as pool:
        pool.resize(4)
        assert len(pool) == 4 and pool.metrics.active == 4
        until(lambda: server.active_sessions == 4)
        assert [r.observation["count"] for r in pool.reset(kwargs={"start": 1})] == [1] * 4
        pool.resize(1)
        assert len(pool) == 1
        until(lambda: server.active_sessions == 1)
        assert (pool.step([{"delta": 1}]))[0].observation["count"] == 2
    until(lambda: server.active_sessions == 0)


def test_close_releases_everything_and_misuse_is_refused(server_factory: Any) -> None:
    server = server_factory(max_sessions=4)
    pool = EnvPool(server.url, size=4)
    with pytest.raises(ValueError, match="size"):
        EnvPool(server.url, size=0)
    with pytest.raises(ValueError, match="on_failure"):
        EnvPool(server.url, on_failure="ignore")  # type: ignore[arg-type]
    with pool:
        pool.reset()
        until(lambda: server.active_sessions == 4)
        pool.send([{"delta": 1, "sleep": 0.5}] * 4)
    # closed with replies outstanding: every session is gone
    assert pool.closed and all(env.closed for env in pool.envs)
    until(lambda: server.active_sessions == 0)
    with pytest.raises(EnvClosed):
        pool.step([{"delta": 1}] * 4)
    pool.close()  # idempotent


def test_from_provider_starts_one_server_per_session_and_stops_them(tmp_path: Path) -> None:
    providers: list[ProcessProvider] = []

    def factory(index: int) -> ProcessProvider:
        provider = ProcessProvider.for_environment("echo", max_sessions=1, cwd=str(tmp_path))
        providers.append(provider)
        return provider

    pool = EnvPool.from_provider(factory, size=2, ready_timeout=30)
    with pool:
        assert len({env.base_url for env in pool.envs}) == 2
        pool.reset()
        results = pool.step([{"message": "a"}, {"message": "bb"}])
        assert [r.observation["echoed_message"] for r in results] == ["a", "bb"]
        pids = servers_in(tmp_path)
        assert len(pids) == 2
        old = pool.providers[1]
        pool.replace(1)
        assert pool.providers[1] is not old and len(providers) == 3
        pool.resize(1)
        assert len(servers_in(tmp_path)) == 1  # the replacement's server went with the resize
    assert servers_in(tmp_path) == set()
    assert not any(alive(pid) for pid in pids)


def test_a_reset_refused_by_its_own_full_server_is_replaced_on_a_new_server(tmp_path: Path) -> None:
    # on_failure="replace", one server per session: a new server has room, so that refusal is replaced (a
    # session on a shared or given server is reported instead: a new session there would only wait again)
    def factory(index: int) -> ProcessProvider:
        return ProcessProvider.for_environment("echo", max_sessions=1, cwd=str(tmp_path))

    pool = EnvPool.from_provider(factory, size=1, ready_timeout=30, on_failure="replace", capacity_timeout=0.3)
    with pool:
        pool.reset()
        old = pool.providers[0]
        pool.envs[0].disconnect()  # its place is taken meanwhile: the next reset is refused
        with Env(pool.envs[0].base_url) as taker:
            taker.reset()
            [result] = pool.reset(seed=3)
            assert result.observation["echoed_message"] is not None
            assert pool.metrics.replacements == 1 and pool.providers[0] is not old
            assert pool.last_errors and isinstance(pool.last_errors[0], CapacityReached)
    assert servers_in(tmp_path) == set()


def test_from_provider_names_the_server_that_failed_and_stops_the_others(tmp_path: Path) -> None:
    providers: list[ProcessProvider] = []

    def factory(index: int) -> ProcessProvider:
        if index == 1:
            code = "import sys; print('cannot start', file=sys.stderr); sys.exit(3)"
            provider = ProcessProvider([sys.executable, "-c", code], cwd=str(tmp_path))
        else:
            provider = ProcessProvider.for_environment("echo", max_sessions=1, cwd=str(tmp_path))
        providers.append(provider)
        return provider

    with pytest.raises(BootstrapError, match="1 of 3 servers failed to start") as info:
        EnvPool.from_provider(factory, size=3, ready_timeout=30)
    assert list(info.value.failures) == [1]
    assert "cannot start" in str(info.value)
    assert len(providers) == 3 and servers_in(tmp_path) == set()

    def broken(index: int) -> ProcessProvider:
        if index == 2:
            raise RuntimeError("no such environment")
        return ProcessProvider.for_environment("echo", max_sessions=1)

    with pytest.raises(BootstrapError, match=r"\[2\] RuntimeError: no such environment"):
        EnvPool.from_provider(broken, size=3, ready_timeout=30)


@pytest.mark.docker
def test_from_docker_image_runs_one_container_per_session_and_removes_them(docker_engine: Any) -> None:
    mine = str(os.getpid())

    def ours() -> list[Any]:
        # sparse: no inspect per container (other tests' containers may vanish meanwhile)
        labels = ["org.openenv.managed=1", f"org.openenv.pid={mine}"]
        found = docker_engine.containers.list(all=True, sparse=True, filters={"label": labels})
        # not the watchdog container that runs beside them (openenv._blocking.watchdog)
        return [c for c in found if (c.attrs.get("Labels") or {}).get("org.openenv.role") != "watchdog"]

    with EnvPool.from_docker_image("openenv-test/echo:latest", size=3, ready_timeout=120) as pool:
        assert len(ours()) == 3
        assert len({env.base_url for env in pool.envs}) == 3
        pool.reset()
        results = pool.step([{"message": str(i)} for i in range(3)])
        assert [r.observation["echoed_message"] for r in results] == ["0", "1", "2"]
    assert ours() == []


# -- review fixes -------------------------------------------------------------------------------


@pytest.mark.parametrize("on_failure", ["raise", "replace"])
def test_a_failed_send_under_max_concurrency_does_not_strand_the_queue(
    counter_server: Any, on_failure: Literal["raise", "replace"]
) -> None:
    with EnvPool(counter_server.url, size=3, max_concurrency=1, on_failure=on_failure) as pool:
        pool.reset()
        pool.envs[0].close()  # session 0's send fails at once (EnvClosed)
        if on_failure == "raise":
            with pytest.raises(PoolError) as info:
                pool.step([{"delta": 1}] * 3)
            assert set(info.value.errors) == {0} and isinstance(info.value.errors[0], EnvClosed)
            assert [r.observation["count"] for r in info.value.results.values() if r is not None] == [1, 1]
        else:
            results = pool.step([{"delta": 1}] * 3)
            assert [r.observation["count"] for r in results] == [0, 1, 1]
        assert (pool.metrics.in_flight, pool.metrics.queued) == (0, 0)
        # the pool goes on: nothing is left queued
        pool.reset(ids=[1, 2])
        assert [r.observation["count"] for r in pool.step([{"delta": 2}] * 2, ids=[1, 2])] == [2, 2]


def test_step_replies_are_due_message_timeout_after_their_send(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=2, message_timeout=4.0) as pool:
        pool.reset()
        # session 1's reply comes 5.5 s after its send: late (by 1.5 s), even though it is read after session 0's
        # (2 s), and would be in time if its 4 s counted from then.  Session 0 has 2 s to spare on a busy machine.
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1, "sleep": 2.0}, {"delta": 1, "sleep": 5.5}])
        assert set(info.value.errors) == {1} and isinstance(info.value.errors[1], MessageTimeout)
        assert info.value.results[0] is not None and info.value.results[0].observation["count"] == 1


def _breaks_after_first_reset() -> Callable[[str], str]:
    resets = [0]

    def reply(frame: str) -> str:
        import json

        from ..envs import reply_ok

        if json.loads(frame).get("type") == "reset" and resets[0] == 0:
            resets[0] += 1
            return reply_ok(frame)
        return "not json"

    return reply


def test_a_failed_replacement_keeps_the_other_sessions_results(counter_server: Any) -> None:
    from ..envs import ScriptServer

    bad = ScriptServer(_breaks_after_first_reset())
    try:
        urls = [bad.url, counter_server.url, counter_server.url]
        with EnvPool(urls, on_failure="replace", replace_attempts=2) as pool:
            pool.reset()
            with pytest.raises(PoolError, match="could not be replaced") as info:
                pool.step([{"delta": 1}] * 3)
            assert list(info.value.errors) == [0]
            assert info.value.results[0] is None
            assert {i: r.observation["count"] for i, r in info.value.results.items() if r is not None} == {1: 1, 2: 1}
            # recv: the error carries what this recv read (by index, None where unreplaced) ...
            pool.send([{"delta": 1}] * 3)
            with pytest.raises(PoolError, match="could not be replaced") as info:
                pool.recv(3)
            assert list(info.value.errors) == [0]
            assert sorted(info.value.results) == [0, 1, 2] and info.value.results[0] is None
            assert {i: r.observation["count"] for i, r in info.value.results.items() if r is not None} == {1: 2, 2: 2}
            # ... and the other completions are not lost either
            rest = pool.recv(2)
            assert sorted((c.index, c.ok) for c in rest) == [(1, True), (2, True)]
            assert [c.result.observation["count"] for c in rest if c.result is not None] == [2, 2]
    finally:
        bad.close()


def _full_until_opened(opened: list[bool]) -> Callable[[str], str]:
    """A script server's reply: every reset answers CAPACITY_REACHED until ``opened[0]`` is set."""

    def reply(frame: str) -> str:
        import json

        from ..envs import reply_ok

        if json.loads(frame).get("type") == "reset" and not opened[0]:
            return json.dumps({"type": "error", "data": {"message": "at capacity", "code": "CAPACITY_REACHED"}})
        return reply_ok(frame)

    return reply


def test_capacity_retries_of_reset_run_together_within_one_deadline() -> None:
    from ..envs import ScriptServer

    opened = [False]
    servers = [ScriptServer(_full_until_opened(opened)) for _ in range(3)]
    try:
        with EnvPool([s.url for s in servers], capacity_timeout=60) as pool:

            def reset() -> Any:
                return pool.reset()

            def retried(server: ScriptServer) -> bool:
                return sum('"reset"' in frame for frame in server.received) >= 2

            def open_once_every_session_waits() -> None:
                # every session's first reset is refused at once; retried one after another, the second
                # server would not hear its retry before the first has room (never, here)
                until(lambda: all(retried(s) for s in servers))
                opened[0] = True

            results, _ = gather(reset, open_once_every_session_waits)
            assert len(results) == 3
        opened[0] = False
        with EnvPool([s.url for s in servers], capacity_timeout=0.3) as pool:
            with pytest.raises(PoolError) as info:
                pool.reset()
            assert sorted(info.value.errors) == [0, 1, 2]
            for error in info.value.errors.values():
                assert isinstance(error, CapacityReached)
                assert "still full after waiting capacity_timeout=0.3 s" in str(error)
    finally:
        for server in servers:
            server.close()


def test_pools_sharing_a_full_server_take_turns_instead_of_locking_each_other_out(server_factory: Any) -> None:
    # Six pools of four on a server of eight, opened at once (threads on the blocking twin): each one used to
    # keep the places it had while it waited for the rest, so that two or more held a part each and all
    # waited until capacity_timeout. A pool now lets go of that server's places while it waits.
    server = server_factory(max_sessions=8)

    def one_pool(n: int) -> int:
        with EnvPool(server.url, size=4, capacity_timeout=60) as pool:
            results = pool.reset(kwargs={"start": n})
            assert [r.observation["count"] for r in results] == [n] * 4
        return n

    assert gather(*[functools.partial(one_pool, n) for n in range(6)], stagger=0) == list(range(6))
    until(lambda: server.active_sessions == 0)


def test_pools_sharing_a_server_that_refuses_at_the_first_reset_take_turns() -> None:
    # OpenEnv's server takes every WebSocket and refuses a session beyond its capacity with the first reset.
    # Two pools hold one place each of a server of two, and each needs both: keeping the place it had reset
    # while it waited for the other, each waited until capacity_timeout. Past the quick retries a pool now
    # lets go of what it reset there (and resets it again with the rest), so they take turns.
    from ..envs import RefusingAtResetServer

    server = RefusingAtResetServer(capacity=2)
    pools = [EnvPool(server.url, size=1, capacity_timeout=20) for _ in range(2)]
    try:
        for pool in pools:
            pool.connect()
            pool.reset()
        for pool in pools:
            pool.resize(2)  # its WebSocket is taken; the server is full, so its first reset is refused
        assert server.active == 2

        def take_turn(k: int) -> int:
            results = pools[k].reset(kwargs={"pool": k})
            assert [r.observation["kwargs"]["pool"] for r in results] == [k, k]
            metrics = pools[k].metrics
            assert (metrics.active, metrics.failures) == (2, 0)
            pools[k].close()
            return k

        assert gather(*[functools.partial(take_turn, k) for k in range(2)], stagger=0) == [0, 1]
        assert server.refused > 2  # beyond the two resizes': the resets waited
        until(lambda: server.active == 0)
    finally:
        for pool in pools:
            pool.close()
        server.close()


def test_a_pool_larger_than_a_server_that_refuses_at_the_first_reset_fails_at_once() -> None:
    # The refusal says the server holds two sessions; a pool of three on it cannot get in by waiting
    from ..envs import RefusingAtResetServer

    server = RefusingAtResetServer(capacity=2)
    try:
        with EnvPool(server.url, size=3, capacity_timeout=60) as pool:
            with pytest.raises(PoolError) as info:
                pool.reset()
            [(refused, error)] = info.value.errors.items()  # whichever of the three came last to the server
            assert "the server holds 2 session(s) and this pool opens 3 on it" in str(error)
            assert server.refused == 1  # not tried again
            others = [r for i, r in info.value.results.items() if i != refused]
            assert [r.observation["kwargs"] for r in others] == [{}, {}]
    finally:
        server.close()


def test_a_session_whose_reset_failed_is_replaced_with_that_resets_seed_and_arguments() -> None:
    # on_failure="replace": the new session's reset is the one asked for (a seeded episode stays seeded)
    import json

    from ..envs import ScriptServer, reply_ok

    resets: list[Any] = []

    def reply(frame: str) -> str:
        request = json.loads(frame)
        if request.get("type") != "reset":
            return reply_ok(frame)
        resets.append(request.get("data"))
        if len(resets) == 1:
            return json.dumps({"type": "error", "data": {"message": "boom", "code": "EXECUTION_ERROR"}})
        observation = {"kwargs": request.get("data")}
        return json.dumps({"type": "observation", "data": {"observation": observation, "done": False}})

    server = ScriptServer(reply)
    try:
        with EnvPool(server.url, size=1, on_failure="replace") as pool:
            [result] = pool.reset(seed=7, kwargs={"level": 2})
            assert result.observation["kwargs"] == {"seed": 7, "level": 2}
            assert resets == [{"seed": 7, "level": 2}] * 2  # the failed reset, then the replacement's
            assert pool.metrics.replacements == 1
            [stepped] = pool.step([{"message": "x"}])
            assert stepped.done is False
    finally:
        server.close()


def test_a_reset_still_refused_when_capacity_timeout_ran_out_is_reported_not_replaced() -> None:
    # on_failure="replace" on a server that stays full: a replacement opens a session on that same server, which
    # only waited again (capacity_timeout per attempt, session after session) before the same report
    from ..envs import RefusingAtResetServer

    server = RefusingAtResetServer(capacity=1)
    blocker = EnvPool(server.url, size=1)
    pool = EnvPool(server.url, size=1, on_failure="replace", capacity_timeout=0.3)
    try:
        blocker.reset()
        with pytest.raises(PoolError, match="still full after waiting capacity_timeout=0.3 s") as info:
            pool.reset()
        assert "could not be replaced" not in str(info.value)
        assert "still refused by a full server when capacity_timeout ran out (indices [0]) and not replaced" in str(
            info.value
        )
        assert pool.metrics.replacements == 0
        blocker.close()
        assert [r.observation["kwargs"] for r in pool.reset(seed=1)] == [{"seed": 1}]
    finally:
        pool.close()
        blocker.close()
        server.close()


def test_a_connect_that_fails_closes_what_it_opened(server_factory: Any) -> None:
    server = server_factory(max_sessions=4)
    others = [Env(server.url) for _ in range(3)]
    for other in others:
        other.connect()
    pool = EnvPool(server.url, size=2, capacity_timeout=0.3)
    with pytest.raises(CapacityReached, match="still full after waiting capacity_timeout=0.3 s"):
        pool.connect()  # one session opened, one refused: the opened one is let go again
    until(lambda: server.active_sessions == 3)
    for other in others:
        other.close()
    pool.connect()  # it may be called again
    assert [r.observation["count"] for r in pool.reset()] == [0, 0]
    pool.close()
    until(lambda: server.active_sessions == 0)


def test_connect_again_leaves_the_open_sessions_and_their_episodes(server_factory: Any) -> None:
    server = server_factory(max_sessions=2)
    with EnvPool(server.url, size=2) as pool:
        pool.reset(kwargs={"start": 5})
        pool.connect()  # idempotent: nothing reopened, no episode lost
        assert [r.observation["count"] for r in pool.step([{"delta": 1}] * 2)] == [6, 6]


def test_step_under_max_concurrency_reads_whichever_reply_comes_first() -> None:
    from openenv.server import EnvServer

    PeakEnv.sleep_peak = 0
    with EnvServer(PeakEnv, host="127.0.0.1", port=0, max_sessions=3) as server:
        with EnvPool(server.url, size=3, max_concurrency=2) as pool:
            pool.reset()
            slow = {"sleep": TOO_LATE}
            results = pool.step([{"delta": 1, **slow}, {"delta": 2}, {"delta": 3, **slow}])
            assert [r.observation["count"] for r in results] == [1, 2, 3]
    # session 1's quick reply freed its slot: session 2 went out while session 0 still ran
    assert PeakEnv.sleep_peak == 2


def test_stale_completions_are_dropped_on_reset_and_replace(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=2, message_timeout=IN_TIME) as pool:
        pool.reset()
        with pytest.raises(PoolError):
            pool.step([{"delta": 1, "sleep": TOO_LATE}], ids=[0])  # session 0 fails (and stays failed)
        pool.send([{"delta": 1}], ids=[0])  # reported by the next recv: nothing was sent
        pool.reset(ids=[0])
        pool.send([{"delta": 1}], ids=[0])
        done = pool.recv()
        assert [(c.index, c.ok) for c in done] == [(0, True)]
        with pytest.raises(PoolError):
            pool.step([{"delta": 1, "sleep": TOO_LATE}], ids=[0])
        pool.send([{"delta": 1}], ids=[0])
        pool.replace(0)
        assert pool.recv() == []
        # a removed session's outcome does not come back for the new session at its index
        with pytest.raises(PoolError):
            pool.step([{"delta": 1, "sleep": TOO_LATE}], ids=[1])
        pool.send([{"delta": 1}], ids=[1])
        pool.resize(1)
        pool.resize(2)
        assert pool.recv() == []


def test_recv_with_timeout_zero_polls(counter_server: Any) -> None:
    with EnvPool(counter_server.url, size=1) as pool:
        pool.reset()
        pool.send([{"delta": 1, "sleep": TOO_LATE}])
        assert pool.recv(timeout=0) == []
        (done,) = pool.recv()
        assert done.ok
        with pytest.raises(ValueError):
            pool.recv(timeout=-1)


def test_from_env_with_a_url_opens_sessions_on_that_server(counter_server: Any) -> None:
    with EnvPool.from_env(counter_server.url, size=3) as pool:
        assert pool.providers == [None, None, None]  # nothing started: the server runs already
        results = pool.reset(kwargs=[{"start": i} for i in range(3)])
        assert [r.observation["count"] for r in results] == [0, 1, 2]
    with pytest.raises(ValueError, match="size"):
        EnvPool.from_env(counter_server.url, size=0)


# The pool has 64 handshakes under way at most (OPENING_AT_ONCE): 512 at once, beside three other
# suites on two cores, ran out of the client's connect_timeout together, or the server's own
# handshake_timeout (10 s) closed the upgrades it had not read yet (two CI runs, the 3.10-default leg)
def test_a_pool_of_512_opens_and_steps_against_a_default_serve_echo() -> None:
    """``EnvPool(size=512)`` against ``python -m openenv serve echo --max-sessions 512`` and no other limit flag.

    (Issue 21: the default pending-connection cap once refused every handshake beyond 64 with 503.)
    """
    from ..faultservers import ServerProcess

    server = ServerProcess("echo", 512).start()
    try:
        # connect_timeout: a margin for a loaded machine, not what the waves need
        with EnvPool(server.url, size=512, connect_timeout=60) as pool:
            assert len(pool.reset()) == 512
            results = pool.step([{"message": f"m{i}"} for i in range(512)])
            assert [r.observation["echoed_message"] for r in results] == [f"m{i}" for i in range(512)]
    finally:
        server.stop()


class _SilentListener:
    """A listener on 127.0.0.1 that accepts every connection and never answers, in a thread of its own.

    ``events`` records ``("open", n)`` per accepted connection and ``("closed", n)`` when its client gave
    up (closed its socket); ``most_open`` is the most connections open at one moment.
    """

    def __init__(self) -> None:
        import socket
        import threading

        self.events: list[tuple[str, int]] = []
        self.most_open = 0
        self._stop = threading.Event()
        self._refuse = threading.Event()
        self._release = 0  # connections to close from this side on the next pass (release())
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._listener.setblocking(False)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve)
        self._thread.start()

    def _serve(self) -> None:
        import select
        import socket

        conns: dict[socket.socket, int] = {}  # the open ones
        accepted = 0
        while not self._stop.is_set():
            readable, _, _ = select.select([self._listener, *conns], [], [], 0.05)
            closed = [sock for sock in readable if sock is not self._listener and not sock.recv(65536)]
            if self._listener in readable:
                while True:  # every connection waiting, before the closes of this pass are recorded
                    try:
                        conn, _ = self._listener.accept()
                    except BlockingIOError:
                        break
                    conns[conn] = accepted
                    self.events.append(("open", accepted))
                    accepted += 1
            for sock in closed:  # their clients gave up: the sockets closed
                self.events.append(("closed", conns.pop(sock)))
                sock.close()
            self.most_open = max(self.most_open, len(conns))
            with self._lock:
                release, self._release = self._release, 0
            for sock in list(conns)[:release]:  # the oldest first
                self.events.append(("released", conns.pop(sock)))
                sock.close()
            if self._refuse.is_set():
                for sock in conns:
                    sock.close()
                conns.clear()
        for sock in conns:
            sock.close()

    @property
    def opened(self) -> int:
        """The connections accepted so far."""
        return sum(1 for what, _ in list(self.events) if what == "open")

    def refuse(self) -> None:
        """From now on, close every connection (the ones held and each new one) from this side."""
        self._refuse.set()

    def release(self, count: int) -> None:
        """Close ``count`` of the connections held (the oldest) from this side, on the listener's next pass."""
        with self._lock:
            self._release += count

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._listener.close()


def test_failed_sessions_are_replaced_at_once(server_factory: Any) -> None:
    """Several failed sessions are replaced together: a server that stopped answering costs one ``connect_timeout``.

    A proxy drops every connection of the pool, then accepts new ones and never answers: every session's step
    fails, and every replacement handshake is seen under way at the same moment (one after another, before: one
    at a time, four ``connect_timeout`` in all).
    """
    from ..faultproxy import FaultProxy

    proxy = FaultProxy(server_factory(max_sessions=8).port)
    pool: EnvPool[Any, Any, Any] = EnvPool(
        proxy.url, size=4, on_failure="replace", replace_attempts=1, connect_timeout=5
    )
    finished: list[bool] = []

    def step() -> Any:
        try:
            return pool.step([{"message": "x"}] * 4)
        finally:
            finished.append(True)

    def watch() -> int:
        peak = 0
        while not finished:
            peak = max(peak, proxy.open_connections())
            sleep(0.01)
        return peak

    try:
        pool.reset()
        proxy.blackhole = True
        proxy.drop()
        failed, peak = gather(step, watch, stagger=0)
        pool.close()
    finally:
        proxy.close()
    assert isinstance(failed, PoolError) and sorted(failed.errors) == [0, 1, 2, 3], failed
    assert all(isinstance(e, ConnectTimeout) for e in failed.errors.values()), failed.errors
    assert "could not be replaced" in str(failed)
    assert peak == 4


def test_a_fresh_pools_first_reset_opens_its_sessions_concurrently() -> None:
    """Without ``connect()``, the first ``reset`` opens the sessions together, not one handshake after another.

    A listener that accepts and never answers: every handshake of the pool must be under way (accepted)
    before the first of them gives up at ``connect_timeout`` (the client closing its socket).
    """
    listener = _SilentListener()
    try:
        pool: EnvPool[Any, Any, Any] = EnvPool(listener.url, size=4, connect_timeout=5)
        with pytest.raises(PoolError) as info:
            pool.reset()
        assert sorted(info.value.errors) == [0, 1, 2, 3]
        assert all(isinstance(e, ConnectTimeout) for e in info.value.errors.values())
        pool.close()
        # the listener's thread sees the closes on its next pass (a loaded CI machine had not run it yet)
        deadline = time.monotonic() + 30
        while [what for what, _ in listener.events].count("closed") < 4 and time.monotonic() < deadline:
            sleep(0.05)
    finally:
        listener.close()
    events = listener.events
    first_close = next(k for k, (what, _) in enumerate(events) if what == "closed")
    assert [what for what, _ in events[:first_close]] == ["open"] * 4, events


@pytest.mark.parametrize("opening", ["connect", "reset"])
def test_a_big_pool_has_at_most_64_handshakes_under_way(opening: str) -> None:
    """``OPENING_AT_ONCE`` handshakes at a time, the rest when places free up: each one's timeout runs from its start.

    (512 handshakes started together on a loaded machine ran out of ``connect_timeout`` together.)
    A listener that holds every connection: 64 arrive; then it closes one of them, and exactly one more
    arrives in its place. No sleep decides it: the 65th connection comes only once the pool has seen a
    handshake fail, while without the limit the other 16, started with the first 64, need no such event.
    """
    listener = _SilentListener()
    pool: EnvPool[Any, Any, Any] = EnvPool(listener.url, size=80, connect_timeout=60)

    def open_all() -> None:
        (pool.connect() if opening == "connect" else pool.reset())

    def seen(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline, listener.events
            sleep(0.05)

    def hold_then_refuse() -> int:
        try:
            seen(lambda: listener.opened >= 64)
            listener.release(1)  # one handshake fails: its place goes to the next session, and to no other
            seen(lambda: listener.opened >= 65)
            held = listener.opened
        finally:
            listener.refuse()  # the 64 handshakes fail at once, and the 15 after them
        seen(lambda: listener.opened == 80)
        return held

    try:
        failed, held = gather(open_all, hold_then_refuse, stagger=0)
        pool.close()
    finally:
        listener.close()
    kinds = [what for what, _ in listener.events]
    assert kinds.index("released") == 64 and held == 65, listener.events  # 64, then one for the place released
    assert isinstance(failed, PoolError) and sorted(failed.errors) == list(range(80)), failed
    assert all(isinstance(e, ConnectError) for e in failed.errors.values())


def test_close_from_another_thread_mid_step_raises_env_closed(server_factory: Any) -> None:
    """The step in flight ends with ``EnvClosed`` (the pool is closed), not a ``PoolError`` naming one session."""
    from ..envs import CounterEnv
    from ..helpers_sync import close_from_another_thread

    server = server_factory(CounterEnv, max_sessions=4)
    pool: EnvPool[Any, Any, Any] = EnvPool(server.url, size=4)
    pool.reset()
    closer = close_from_another_thread(pool.close, delay=0.3)
    with pytest.raises(EnvClosed, match="this EnvPool is closed"):
        pool.step([{"delta": 1, "sleep": 3}] * 4)
    assert not closer.finish()
    with pytest.raises(EnvClosed):
        pool.step([{"delta": 1}] * 4)


def test_close_from_another_thread_ends_a_reset_waiting_for_capacity(server_factory: Any) -> None:
    """``close()`` during the capacity wait of a first ``reset``: ``EnvClosed``, not a ``PoolError`` of retries."""
    from ..envs import CounterEnv
    from ..helpers_sync import close_from_another_thread

    server = server_factory(CounterEnv, max_sessions=1)
    holder = Env(server.url)
    holder.reset()  # the one slot is taken for the whole test
    try:
        pool: EnvPool[Any, Any, Any] = EnvPool(server.url, size=1, capacity_timeout=30)
        closer = close_from_another_thread(pool.close, delay=0.5)
        with pytest.raises(EnvClosed, match="this EnvPool is closed"):
            pool.reset()
        assert not closer.finish()
        assert server.active_sessions == 1  # the holder's: nothing of the pool's is left
    finally:
        holder.close()
