"""Behaviour only the async twin has: cancellation, event-loop binding, many sessions on one loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from openenv.aio import Env, SessionLost

from .envs import IN_TIME, TOO_LATE, CounterEnv, CounterObservation
from .helpers_async import until
from .leaks import alive, servers_in


class _StepSeen(CounterEnv):
    """:class:`CounterEnv` that says when the server began a step (``STEP_SEEN``)."""

    def _extra(self, action: Any) -> dict[str, Any]:
        STEP_SEEN.set()
        return super()._extra(action)


STEP_SEEN = threading.Event()


async def test_cancellation_mid_step_loses_the_session_cleanly(server_factory: Any) -> None:
    server = server_factory(_StepSeen, max_sessions=2)
    env = Env(server.url)
    await env.reset(start=1)
    STEP_SEEN.clear()
    task = asyncio.create_task(env.step({"delta": 1, "sleep": TOO_LATE}))
    await asyncio.to_thread(STEP_SEEN.wait, 30)  # the step is on the server: cancelled mid-step, not before sending
    assert STEP_SEEN.is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not env.connected
    with pytest.raises(SessionLost, match="interrupted"):
        await env.step({"delta": 1})
    assert (await env.reset(start=3)).observation["count"] == 3
    await env.close()


async def test_a_pool_cancelled_while_waiting_for_room_closes_what_it_opened(server_factory: Any) -> None:
    from openenv.aio import EnvPool

    roomy, full = server_factory(max_sessions=4), server_factory(max_sessions=1)
    blocker = await Env(full.url).connect()
    pool = EnvPool([roomy.url, full.url], capacity_timeout=60)
    task = asyncio.create_task(pool.connect())
    await until(lambda: roomy.active_sessions == 1)  # its session on the roomy server is open; the other waits
    await asyncio.sleep(0.7)  # into the backoff's longer waits (cancelled between two tries, not during one)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: roomy.active_sessions == 0)  # let go of, not left open until garbage collection
    await blocker.close()
    await pool.connect()  # fresh clients: it may be called again
    assert len(await pool.reset()) == 2
    await pool.close()


async def test_a_pool_reset_cancelled_while_waiting_for_room_lets_go_of_its_sessions() -> None:
    # A server that refuses with the first reset (OpenEnv's): the refused session waits, and past the quick
    # retries the one that was reset is let go too; cancelled then, both stay failed with fresh clients
    from openenv.aio import EnvPool

    from .envs import RefusingAtResetServer

    server = RefusingAtResetServer(capacity=2)
    blocker = EnvPool(server.url, size=1)
    pool = EnvPool(server.url, size=2, capacity_timeout=60)
    try:
        await blocker.reset()
        await pool.connect()  # both WebSockets are taken; the second is refused with its first reset
        task = asyncio.create_task(pool.reset())
        await until(lambda: server.refused >= 6)  # past the quick retries: the one that was reset has been let go
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: server.active == 1)  # the blocker's: nothing of the pool's stays open
        assert pool.metrics.active == 0  # both failed
        await blocker.close()
        assert [r.observation["kwargs"]["n"] for r in await pool.reset(kwargs={"n": 1})] == [1, 1]
    finally:
        await pool.close()
        await blocker.close()
        server.close()


async def test_timeout_from_the_caller_is_cancellation(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=2)
    async with Env(server.url) as env:
        await env.reset()
        # asyncio.TimeoutError is TimeoutError from Python 3.11 on; 3.10's wait_for raises its own
        with pytest.raises((TimeoutError, asyncio.TimeoutError)):
            await asyncio.wait_for(env.step({"delta": 1, "sleep": TOO_LATE}), 0.2)
        with pytest.raises(SessionLost):
            await env.state()


def test_a_connection_is_never_reused_on_another_loop(echo_server: Any) -> None:
    env = Env(echo_server.url)

    async def first() -> None:
        await env.connect()  # connected, no episode yet

    async def second() -> str:
        result = await env.reset()  # reconnects on this loop: nothing was lost
        await env.step({"message": "loop2"})
        return str(result.observation["echoed_message"])

    async def third() -> None:
        with pytest.raises(SessionLost, match="another event loop"):
            await env.step({"message": "loop3"})
        await env.reset()
        await env.close()

    asyncio.run(first())
    assert asyncio.run(second()) == "Echo environment ready!"
    asyncio.run(third())


async def test_many_sessions_on_one_loop(echo_server: Any) -> None:
    async def episode(n: int) -> int:
        async with Env(echo_server.url) as env:
            await env.reset()
            for i in range(10):
                await env.step({"message": f"{n}.{i}"})
            return int((await env.state())["step_count"])

    counts = await asyncio.gather(*(episode(n) for n in range(32)))
    assert counts == [10] * 32


def _managed_of_this_process(engine: Any) -> list[str]:
    from .leaks import managed_containers  # one listing, no inspect: a container being removed is no NotFound

    return managed_containers(engine)


@pytest.mark.docker
@pytest.mark.parametrize("after", [0.0, 0.05, 0.2, 0.5, 1.5])
async def test_cancellation_at_any_point_of_docker_bootstrap_leaves_nothing(docker_engine: Any, after: float) -> None:
    task = asyncio.create_task(Env.from_docker_image("openenv-test/slow:latest", env_vars={"OPENENV_TEST_DELAY": "3"}))
    await asyncio.sleep(after)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the shielded cleanup may still be finishing in its worker thread
    for _ in range(100):
        if not _managed_of_this_process(docker_engine):
            break
        await asyncio.sleep(0.05)
    assert _managed_of_this_process(docker_engine) == []


async def _until(check: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.02)


async def test_cancellation_during_process_bootstrap_stops_the_process(tmp_path: Path) -> None:
    import sys

    from openenv.aio import ProcessProvider

    provider = ProcessProvider([sys.executable, "-c", "import time; time.sleep(60)"], cwd=str(tmp_path))
    task = asyncio.create_task(Env.from_provider(provider, ready_timeout=30))
    await _until(lambda: servers_in(tmp_path))  # the process runs: the bootstrap waits for it to be ready
    (server,) = servers_in(tmp_path)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(server)


async def test_message_timeout_in_a_task_that_absorbed_a_cancellation(server_factory: Any) -> None:
    from openenv.aio import MessageTimeout

    server = server_factory(CounterEnv, max_sessions=2)

    async def body() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            pass  # absorbed, as graceful-shutdown code does: cancelling() stays 1
        async with Env(server.url, message_timeout=IN_TIME) as env:
            await env.reset()
            with pytest.raises(MessageTimeout):
                await env.step({"delta": 1, "sleep": TOO_LATE})

    await asyncio.create_task(body())


async def test_cancellation_while_many_servers_come_up_stops_them_all(tmp_path: Path) -> None:
    import sys

    from openenv._async.bootstrap import start_providers
    from openenv.aio import ProcessProvider

    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    providers = [ProcessProvider(command, cwd=str(tmp_path)) for _ in range(3)]
    task = asyncio.create_task(start_providers(providers, 30))
    await _until(lambda: len(servers_in(tmp_path)) == 3)  # all three are waiting (their processes run)
    servers = servers_in(tmp_path)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # a start still in its worker thread when the cancellation came stops its own process as it returns
    # (the thread cannot be interrupted): a moment after the task, not necessarily before it
    await _until(lambda: not any(alive(pid) for pid in servers), timeout=30.0)


async def test_a_connection_abandoned_as_it_is_made_ends_its_handshake_at_once() -> None:
    """``ws_abandon`` on a connection before its transport exists (asyncio) still drops it.

    ``close()`` that came while the TCP connection was being made abandons the connection as
    soon as it is made; asyncio makes it before it has a transport, so the abandon must wait
    for the transport: without that, the handshake with a silent server ran to its timeout.
    """
    import socket

    from openenv._shim_async import ws_abandon, ws_connect

    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"ws://127.0.0.1:{silent.getsockname()[1]}/ws"
        with pytest.raises(Exception) as info:
            async with ws_connect(url, on_connection=ws_abandon, open_timeout=60):
                pass
        assert not isinstance(info.value, TimeoutError), info.value


# -- OpenEnv's blocking providers (tests/openenv_shaped.py): the loop never waits for them -------------------


async def test_an_openenv_providers_blocking_start_never_holds_the_event_loop() -> None:
    import threading

    from .openenv_shaped import RuntimeLike

    gate = threading.Event()
    upstream = RuntimeLike(hold_start=gate)
    opening = asyncio.create_task(Env.from_provider(upstream, ready_timeout=30))
    # this loop keeps running while start() blocks: it is what releases start (a stalled loop would time it out)
    assert await asyncio.to_thread(upstream.in_start.wait, 30)
    gate.set()
    env = await opening
    await env.reset()
    await env.close()
    assert not upstream.running


@pytest.mark.parametrize("point", ["start", "ready", "stop"])
async def test_cancelling_at_each_blocking_call_leaves_nothing_running(point: str) -> None:
    import threading

    from openenv.aio import OpenEnvProvider

    from .openenv_shaped import RuntimeLike

    gate = threading.Event()
    holds: dict[str, Any] = {f"hold_{point}": gate}
    upstream = RuntimeLike(**holds)
    entered = {"start": upstream.in_start, "ready": upstream.in_ready, "stop": upstream.in_stop}[point]
    task: asyncio.Task[Any]
    if point == "stop":
        env = await Env.from_provider(upstream, ready_timeout=30)
        task = asyncio.create_task(env.close())
    else:

        async def opening() -> Any:
            return await Env.from_provider(upstream, ready_timeout=30)

        task = asyncio.create_task(opening())
    assert await asyncio.to_thread(entered.wait, 30)
    task.cancel()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the cancelled caller did not wait for the blocking call; the cleanup runs once it returns
    await until(lambda: not upstream.running and "stop" in upstream.calls)
    assert upstream.calls.count("stop") == 1
    assert isinstance(env.provider if point == "stop" else OpenEnvProvider, (OpenEnvProvider, type))


#: Set by the event loop while ``Env.from_env`` names a package: its client's import waits for it.
LOOP_FREE = threading.Event()
#: What the gated client's import saw: whether the loop set ``LOOP_FREE``, and the thread it ran in.
IMPORT_SEEN: dict[str, Any] = {}

GATED_CLIENT = """\
import threading

from tests import test_async_only as here

here.IMPORT_SEEN["loop_ran"] = here.LOOP_FREE.wait(here.IN_TIME)
here.IMPORT_SEEN["thread"] = threading.current_thread()

from tests.envs import CounterClient as GatedEnv
"""


async def test_naming_a_package_does_not_hold_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter_server: Any
) -> None:
    """A bare name reads every installed distribution and imports the package's client (``openenv.core``: seconds).

    The client's import here waits for the loop to run a task: on the loop it would wait in vain.
    """
    import sys

    from .env_packages import install_env_package

    site = tmp_path / "site"
    site.mkdir()
    install_env_package(site, "openenv-gated-env", "gated_env", GATED_CLIENT, "spec_version: 1\nname: gated_env\n")
    monkeypatch.syspath_prepend(str(site))
    LOOP_FREE.clear()
    IMPORT_SEEN.clear()

    async def free() -> None:
        LOOP_FREE.set()

    setter = asyncio.ensure_future(free())  # runs as soon as from_env lets the loop go on
    try:
        async with await Env.from_env("gated", base_url=counter_server.url) as env:
            assert isinstance((await env.reset()).observation, CounterObservation)  # typed with the package's client
    finally:
        await setter
        for name in [n for n in sys.modules if n == "gated_env" or n.startswith("gated_env.")]:
            del sys.modules[name]
    assert IMPORT_SEEN["loop_ran"] is True
    assert IMPORT_SEEN["thread"] is not threading.main_thread()


async def test_a_reset_waiting_for_a_pool_session_stops_when_its_instance_is_closed(server_factory: Any) -> None:
    """``close()`` does not wait for a reset in progress: the waiting one ends with ``EnvClosed`` and takes nothing."""
    from openenv.aio import EnvClosed, EnvPool, environment_factory

    server = server_factory(CounterEnv, max_sessions=2)
    async with EnvPool(server.url, size=1) as pool:
        cls = await environment_factory(pool, capacity_timeout=10 * TOO_LATE)
        holder, waiter = cls(), cls()
        await holder.reset()  # the pool's only session
        task = asyncio.ensure_future(waiter.reset())
        await asyncio.sleep(0)  # the reset has begun: it waits for the session holder has
        await waiter.close()
        with pytest.raises(EnvClosed, match="closed during its reset"):
            await asyncio.wait_for(task, TOO_LATE)  # within the backoff's ceiling, not capacity_timeout
        assert waiter.env is None and pool.metrics.checked_out == 1  # holder's, still
        await holder.close()
        assert pool.metrics.checked_out == 0
        await cls.close()


async def test_cancelling_while_failed_sessions_are_replaced_at_once_ends_every_replacement(
    server_factory: Any,
) -> None:
    """Cancelled while four replacement handshakes wait on a server that stopped answering: they end with it,
    the sessions stay failed with fresh clients, nothing is left open, and the pool resets once it answers."""
    from openenv.aio import EnvPool

    from .faultproxy import FaultProxy

    proxy = FaultProxy(server_factory(CounterEnv, max_sessions=8).port)
    pool = EnvPool(proxy.url, size=4, on_failure="replace", replace_attempts=1, connect_timeout=120)
    try:
        await pool.reset()
        old = pool.envs
        proxy.blackhole = True
        proxy.drop()
        task = asyncio.create_task(pool.step([{}] * 4))
        await until(lambda: proxy.open_connections() == 4)  # every replacement under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: proxy.open_connections() == 0)  # every handshake ended
        assert not any(env is was for env, was in zip(pool.envs, old, strict=True))  # fresh clients
        assert not any(env.connected for env in pool.envs)
        assert pool.metrics.active == 0  # all four failed
        proxy.blackhole = False
        assert len(await pool.reset()) == 4
        assert pool.metrics.active == 4
    finally:
        await pool.close()
        proxy.close()


async def test_cancelling_while_servers_are_restarted_at_once_keeps_the_sessions_already_replaced(
    tmp_path: Path,
) -> None:
    """Two sessions on servers of their own die; session 0's new server comes up, session 1's never answers:
    cancelled once session 0 is replaced, only session 1's new server is stopped, and session 0 steps on."""
    import os
    import signal

    from openenv.aio import EnvPool, ProcessProvider

    from .envs import one_replacement_never_listens

    factory = one_replacement_never_listens(ProcessProvider, tmp_path)  # session 1's second server hangs
    pool = await EnvPool.from_provider(factory, size=2, ready_timeout=120, on_failure="replace", replace_attempts=1)
    try:
        await pool.reset()
        for provider in pool.providers:
            assert isinstance(provider, ProcessProvider) and provider.pid is not None
            os.kill(provider.pid, signal.SIGKILL)
        task = asyncio.create_task(pool.step([{"message": "a"}, {"message": "b"}]))
        await until(lambda: pool.metrics.replacements == 1 and servers_in(tmp_path / "s1-2") != set())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: servers_in(tmp_path / "s1-2") == set())  # session 1's new server: stopped
        replaced = pool.providers[0]
        assert isinstance(replaced, ProcessProvider) and replaced.pid is not None
        assert alive(replaced.pid)  # session 0's: kept
        assert servers_in(tmp_path / "s0-2") == {replaced.pid}
        [result] = await pool.step([{"message": "still here"}], ids=[0])
        assert result.observation["echoed_message"] == "still here"
        assert pool.metrics.active == 1
    finally:
        await pool.close()
    assert all(servers_in(tmp_path / name) == set() for name in ("s0-1", "s1-1", "s0-2", "s1-2"))
