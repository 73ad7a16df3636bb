"""The generated classes under the calling convention of TRL 1.16's ``AsyncGRPOTrainer`` (asyncio only).

``trl/experimental/async_grpo/async_rollout_worker.py`` (``_AsyncRolloutLoop``):
one instance per rollout, made on the loop's thread (the probe before the loop
runs); ``reset(**row)`` through ``loop.run_in_executor`` and its text used as
it is; a tool awaited on the loop when ``inspect.iscoroutinefunction(tool)``,
else in the executor; ``get_reward`` likewise.  ``nox -s trl`` drives TRL's real
loop (``examples/trl_async_ci.py``); this is the same convention without TRL.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import openenv.aio as aio
import openenv.sync as sync

from .envs import PenaltyToolsEnv

ROW = {"prompt": [{"role": "user", "content": "Add."}], "seed": 1}


def _client_threads() -> int:
    """This process's threads, less the in-process server's (its listener and one per session: ``openenv-...``)."""
    return sum(1 for thread in threading.enumerate() if not thread.name.startswith("openenv-"))


async def _call(loop: Any, pool: ThreadPoolExecutor, fn: Any, **kwargs: Any) -> Any:
    """What TRL does with a tool or ``get_reward``: awaited when a coroutine function, else in the executor."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    return await loop.run_in_executor(pool, functools.partial(fn, **kwargs))


async def _rollouts(cls: Any, probe: Any, n: int, pool: ThreadPoolExecutor) -> tuple[list[Any], list[Any], int]:
    """``n`` rollouts in flight as ``_AsyncRolloutLoop`` runs them; the results and the threads seen at the peak."""
    loop = asyncio.get_running_loop()
    free = [probe]
    opened = asyncio.Event()
    started = 0
    peak = 0

    async def one() -> tuple[str, str, str, float]:
        nonlocal started, peak
        env = free.pop() if free else cls()  # made on the loop's thread when the pool is empty
        text = await loop.run_in_executor(pool, functools.partial(env.reset, **ROW))
        started += 1
        if started == n:
            peak = _client_threads()  # every session open
            opened.set()
        await opened.wait()  # all in flight at once
        added = await _call(loop, pool, env.add, a=1, b=2)
        failed = await _call(loop, pool, env.fail, message="bad")
        reward = await _call(loop, pool, env.get_reward)
        return text, added, failed, reward

    results = await asyncio.gather(*(one() for _ in range(n)))
    return list(results), [r[3] for r in results], peak


def test_the_aio_class_runs_on_the_trainers_loop_with_no_thread_per_session(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=40, transport="asyncio")  # its threads are not counted
    cls = asyncio.run(aio.environment_factory(server.url, name="Calc"))
    assert not inspect.iscoroutinefunction(cls.reset) and inspect.isfunction(cls.reset)  # TRL's executor call
    assert inspect.iscoroutinefunction(cls.add) and inspect.iscoroutinefunction(cls.get_reward)  # on the loop
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="grpo-tool") as pool:
        list(pool.map(lambda _: threading.active_count(), range(8)))  # the executor's threads exist now

        probe = cls()  # made before the loop runs (_AsyncRolloutLoop.__init__): bound where env.reset is read

        async def main() -> tuple[Any, Any, int, int]:
            # asyncio's own executor (name lookups of connect) gets at most 2 threads: threads stay countable
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
            few = await _rollouts(cls, probe, 4, pool)
            many = await _rollouts(cls, cls(), 32, pool)
            return few[0] + many[0], few[1] + many[1], few[2], many[2]

        results, rewards, threads_at_4, threads_at_32 = asyncio.run(main())
    try:
        assert {r[0] for r in results} == {"\n\nCall add(a, b). Failed calls cost 1.0."}
        assert {r[1] for r in results} == {"3"}
        assert all(r[2].startswith("Error: ") for r in results)
        assert rewards == [-0.5] * 36  # the failed call's penalty reached get_reward
        # 32 sessions against 4: at most the executors' 6 threads more (the sync class: 2 per session, +56)
        assert threads_at_32 - threads_at_4 <= 6
    finally:
        asyncio.run(cls.close())


def test_the_calls_of_one_aio_instance_run_one_at_a_time(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=4)

    async def main() -> list[str]:
        cls = await aio.environment_factory(server.url)
        try:
            env = cls()
            await env.reset()
            return list(await asyncio.gather(*(env.add(i, 1) for i in range(6))))  # never SessionBusy
        finally:
            await cls.close()

    assert asyncio.run(main()) == [str(i + 1) for i in range(6)]


def test_the_aio_class_says_what_to_do_without_a_loop_or_on_a_second_loop(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=4)
    cls = asyncio.run(aio.environment_factory(server.url))
    try:
        env = cls()
        with pytest.raises(TypeError, match=r"openenv\.sync\.environment_factory"):
            env.reset(**ROW)  # type: ignore[unused-coroutine]  # what TRL's GRPOTrainer does: from plain code

        async def on_one_loop() -> None:
            await env.reset()  # its session lives on this loop

        asyncio.run(on_one_loop())

        async def on_another_loop() -> None:
            await env.add(1, 1)

        with pytest.raises(RuntimeError, match="another event loop.*one loop"):
            asyncio.run(on_another_loop())
        asyncio.run(env.close())

        async def after_close() -> str:
            await env.reset()
            return str(await env.add(1, 1))

        assert asyncio.run(after_close()) == "2"  # closed: the next reset opens a session on the new loop
    finally:
        asyncio.run(cls.close())


def test_the_sync_class_runs_in_the_trainers_executor(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=12)
    cls = sync.environment_factory(server.url)
    assert not inspect.iscoroutinefunction(cls.add)  # TRL runs every call in its executor
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results, rewards, _ = asyncio.run(_rollouts(cls, cls(), 8, pool))
        assert {r[1] for r in results} == {"3"} and rewards == [-0.5] * 8
    finally:
        cls.close()


def _websockets_threads() -> dict[str, int]:
    """The threads of ``websockets.sync`` connections here: a reader per connection, and a keepalive with pings."""
    names = [thread.name for thread in threading.enumerate()]
    return {kind: sum(name.endswith(f"({kind})") for name in names) for kind in ("recv_events", "keepalive")}


@pytest.mark.parametrize(("options", "per_session"), [({}, 2), ({"ping_interval": None}, 1)])
def test_the_sync_class_costs_two_threads_per_session_or_one_without_pings(
    server_factory: Any, options: dict[str, Any], per_session: int
) -> None:
    """What the guide says the ``openenv.sync`` class costs in the async trainer's executor (websockets' threads)."""
    server = server_factory(PenaltyToolsEnv, max_sessions=8, transport="asyncio")  # its threads are not counted
    cls = sync.environment_factory(server.url, **options)
    try:
        before = set(threading.enumerate())  # an earlier test's connection may still be ending: not counted
        envs = [cls() for _ in range(6)]
        for env in envs:
            env.reset()
        new = [t.name for t in set(threading.enumerate()) - before]
        assert sum(name.endswith(("(recv_events)", "(keepalive)")) for name in new) == 6 * per_session
    finally:
        cls.close()
