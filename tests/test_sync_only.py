"""Behaviour only the blocking twin has: no asyncio, no leaked threads, Ctrl-C, use inside a loop."""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv._cli._common import ctrl_c_never_lost  # a Ctrl-C lost in a finalizer is sent again
from openenv.sync import Env, SessionLost

from .envs import TOO_LATE, CounterEnv
from .helpers_sync import until
from .leaks import servers_in


def test_full_episode_in_a_fresh_interpreter_never_imports_asyncio(echo_server: Any) -> None:
    code = textwrap.dedent(
        f"""
        import sys, threading, time
        from openenv.sync import Env
        before = {{t.ident for t in threading.enumerate()}}
        with Env("{echo_server.url}") as env:
            env.reset()
            for i in range(3):
                env.step({{"message": str(i)}})
            env.state()
            child = env.new_session()
            child.reset()
        deadline = time.monotonic() + 10  # websockets' threads end a moment after the close (a busy machine)
        while True:
            left = [t.name for t in threading.enumerate() if t.ident not in before]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        print("asyncio" in sys.modules, left)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 1) == ["False", "[]\n"]


def test_no_thread_outlives_close(echo_server: Any) -> None:
    before = set(threading.enumerate())
    env = Env(echo_server.url)
    env.reset()
    env.step({"message": "x"})
    assert len(set(threading.enumerate()) - before) >= 1  # websockets' reader (and keepalive) threads
    env.close()
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()


def test_ctrl_c_during_a_step_loses_the_session_cleanly(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=2)
    env = Env(server.url)
    env.reset(start=1)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
        env.step({"delta": 1, "sleep": TOO_LATE})
    timer.join()
    assert not env.connected
    with pytest.raises(SessionLost, match="interrupted"):
        env.step({"delta": 1})
    assert env.reset(start=9).observation["count"] == 9
    env.close()


@contextlib.contextmanager
def sigint_after(delay: float) -> Iterator[None]:
    """A real SIGINT to this process after ``delay`` seconds (``interrupt_main`` only sets a flag,
    which a wait on a lock never sees); never later than the block: a late one would hit the next test."""
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with ctrl_c_never_lost():
            yield
    finally:
        timer.cancel()
        timer.join()


def test_ctrl_c_during_the_handshake_leaves_no_socket_or_thread() -> None:
    """A server that accepts and never answers the upgrade; Ctrl-C while the client waits for it."""
    import socket

    from . import leaks

    with socket.create_server(("127.0.0.1", 0)) as silent:
        before = leaks.snapshot()
        env = Env(f"http://127.0.0.1:{silent.getsockname()[1]}", connect_timeout=60)
        with sigint_after(0.5), pytest.raises(KeyboardInterrupt):
            env.connect()
        env.close()
        # the client's socket and websockets' reader thread are gone, while the server still holds its end
        # (in the listener's backlog: never accepted, so no file descriptor of this process)
        leaks.assert_no_leaks(before)


def test_ctrl_c_while_pool_sessions_shake_hands_ends_them_at_once() -> None:
    """Ctrl-C during ``EnvPool.connect()`` to a server that never answers: the handshakes end with it.

    (Before, ``close()`` could not end a handshake under way, so the interrupt waited for every
    session's ``connect_timeout``.)
    """
    import socket

    from openenv.sync import EnvPool

    from . import leaks

    with socket.create_server(("127.0.0.1", 0)) as silent:
        before = leaks.snapshot()
        pool = EnvPool(f"http://127.0.0.1:{silent.getsockname()[1]}", size=4, connect_timeout=120)
        start = time.monotonic()
        with sigint_after(0.5), pytest.raises(KeyboardInterrupt):
            pool.connect()
        assert time.monotonic() - start < 60  # the interrupt, not the two minutes of connect_timeout
        pool.close()
        leaks.assert_no_leaks(before)


def test_ctrl_c_during_the_first_reset_of_an_unconnected_pool_leaves_it_usable() -> None:
    """The first ``reset`` opens the sessions (no ``connect()`` before): Ctrl-C there must settle every request."""
    import socket

    from openenv.sync import ConnectError, EnvPool, PoolError

    silent = socket.create_server(("127.0.0.1", 0))
    pool = EnvPool(f"http://127.0.0.1:{silent.getsockname()[1]}", size=3, connect_timeout=60)
    try:
        with sigint_after(0.5), pytest.raises(KeyboardInterrupt):
            pool.reset()
        assert pool.metrics.in_flight == 0 and pool.metrics.queued == 0
        silent.close()  # tried again, on a port nobody listens on: refused at once, and the pool is not "busy"
        with pytest.raises(PoolError) as info:
            pool.reset()
        assert sorted(info.value.errors) == [0, 1, 2]
        assert all(isinstance(e, ConnectError) for e in info.value.errors.values()), info.value.errors
    finally:
        pool.close()
        silent.close()


def test_ctrl_c_while_run_all_starts_its_threads_still_reaches_on_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C landing while the threads are being started (a loaded machine is slow at it) must stop them.

    Before, it escaped before the wait's ``try``: ``on_interrupt`` never ran, and leaving the pool joined the
    calls already running (``EnvPool.connect()`` then waited out every handshake's ``connect_timeout``).
    """
    from openenv._shim_sync import run_all

    started, release = threading.Event(), threading.Event()
    interrupted: list[bool] = []

    def blocking() -> int:
        started.set()
        release.wait(5)  # what on_interrupt ends (a handshake, a capacity wait)
        return 1

    start = threading.Thread.start
    starting: list[threading.Thread] = []

    def ctrl_c_before_the_second(self: threading.Thread) -> None:
        if self.name.startswith("openenv-run-all"):
            starting.append(self)
            if len(starting) == 2:
                started.wait(5)
                raise KeyboardInterrupt  # as the signal would, between two thread starts
        start(self)

    def on_interrupt() -> None:
        interrupted.append(True)
        release.set()

    monkeypatch.setattr(threading.Thread, "start", ctrl_c_before_the_second)
    with pytest.raises(KeyboardInterrupt):
        run_all([blocking, blocking], on_interrupt)
    monkeypatch.undo()
    assert interrupted == [True]
    assert [t.name for t in threading.enumerate() if t.name.startswith("openenv-run-all")] == []


def test_ctrl_c_inside_a_thread_start_of_run_all_still_joins_that_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Thread.start()`` waits for the new thread to run: a Ctrl-C landing in that wait (a loaded machine
    is slow to schedule it) must not leave the thread running after ``run_all`` raised.

    (A ThreadPoolExecutor records a thread only after its start() returns: a CI run found one such
    thread alive after the interrupt.)
    """
    from openenv._shim_sync import run_all

    release = threading.Event()
    start = threading.Thread.start

    def start_then_ctrl_c(self: threading.Thread) -> None:
        start(self)
        if self.name.startswith("openenv-run-all"):
            raise KeyboardInterrupt  # as the signal would, in start()'s wait for the new thread

    def blocking() -> int:
        release.wait(5)  # what on_interrupt ends (a handshake, a capacity wait)
        time.sleep(0.3)  # then a moment of clean-up
        return 1

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run_all([blocking, blocking], release.set)
    monkeypatch.undo()
    assert [t.name for t in threading.enumerate() if t.name.startswith("openenv-run-all")] == []


def test_works_inside_a_running_event_loop(echo_server: Any) -> None:
    """Notebooks run code inside a loop; the blocking twin does not care."""

    async def main() -> str:
        with Env(echo_server.url) as env:
            env.reset()
            return str(env.step({"message": "in-loop"}).observation["echoed_message"])

    assert asyncio.run(main()) == "in-loop"


def test_separate_sessions_from_many_threads(echo_server: Any) -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            with Env(echo_server.url) as env:
                env.reset()
                for i in range(20):
                    assert env.step({"message": f"{n}-{i}"}).observation["echoed_message"] == f"{n}-{i}"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def _managed_of_this_process(engine: Any) -> list[str]:
    from .leaks import managed_containers  # one listing, no inspect: a container being removed is no NotFound

    return managed_containers(engine)


@pytest.mark.docker
@pytest.mark.parametrize("after", [0.05, 0.2, 0.5, 1.5])
# an interrupt inside socket.create_connection (docker-py's or httpx's connect) leaves that half-made
# socket to the garbage collector (see below): collected here, where its ResourceWarning is expected
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_ctrl_c_at_any_point_of_docker_bootstrap_leaves_nothing(docker_engine: Any, after: float) -> None:
    import gc

    timer = threading.Timer(after, _thread.interrupt_main)
    timer.start()
    try:
        with ctrl_c_never_lost():  # one that lands in a finalizer is sent again
            env = Env.from_docker_image("openenv-test/slow:latest", env_vars={"OPENENV_TEST_DELAY": "3"})
    except KeyboardInterrupt:
        pass
    else:  # pragma: no cover - the interrupt always lands during the 3 s delay
        env.close()
        pytest.fail("bootstrap finished before the interrupt")
    finally:
        timer.join()
    assert _managed_of_this_process(docker_engine) == []
    gc.collect()


def _registered(where: Path, count: int) -> bool:
    """Whether ``count`` servers run in ``where`` and each is registered (its provider's start is over)."""
    from openenv._blocking.process_registry import list_records
    from openenv._blocking.procfs import process_start_time

    servers = {(pid, process_start_time(pid)) for pid in servers_in(where)}  # PIDs wrap: with start times
    return len(servers) == count and servers <= {(record.pid, record.start_time) for record in list_records()}


def _ctrl_c_when(condition: Callable[[], bool], timeout: float = 30.0) -> threading.Thread:
    """Ctrl-C (``interrupt_main``) from a thread once ``condition()`` holds: at that point, not after a guess.

    Join the returned thread after the ``KeyboardInterrupt``.
    """

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return  # never true: no Ctrl-C, and the test says so (no KeyboardInterrupt)
            time.sleep(0.01)
        _thread.interrupt_main()

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


# A KeyboardInterrupt that lands inside socket.create_connection (httpx's health poll) leaves that
# half-made socket to the garbage collector: CPython closes it only on OSError.  Collect it here,
# where its ResourceWarning is expected, instead of in whichever test runs next.
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_ctrl_c_during_process_bootstrap_stops_the_process(tmp_path: Path) -> None:
    import gc

    from openenv.sync import ProcessProvider

    provider = ProcessProvider([sys.executable, "-c", "import time; time.sleep(60)"], cwd=str(tmp_path))
    timer = _ctrl_c_when(lambda: _registered(tmp_path, 1))  # the process runs: the bootstrap waits on it
    with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
        Env.from_provider(provider, ready_timeout=30)
    timer.join()
    assert servers_in(tmp_path) == set()
    gc.collect()


@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_ctrl_c_while_many_servers_come_up_stops_them_all_and_ends_the_threads(tmp_path: Path) -> None:
    import gc

    from openenv._sync.bootstrap import start_providers
    from openenv.sync import ProcessProvider

    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    providers = [ProcessProvider(command, cwd=str(tmp_path)) for _ in range(3)]
    timer = _ctrl_c_when(lambda: _registered(tmp_path, 3))  # all three run: their readiness waits are on
    with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
        start_providers(providers, 30)
    timer.join()
    assert servers_in(tmp_path) == set()
    assert [t.name for t in threading.enumerate() if t.name.startswith("openenv-run-all")] == []
    gc.collect()


def test_a_stop_that_raises_does_not_keep_the_others_from_stopping_on_ctrl_c(tmp_path: Path) -> None:
    from openenv._sync.bootstrap import start_providers
    from openenv.sync import ProcessProvider

    class BrokenStop(ProcessProvider):
        def stop(self) -> None:
            super().stop()
            raise RuntimeError("stop broke")

    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    here = str(tmp_path)
    providers = [BrokenStop(command, cwd=here), ProcessProvider(command, cwd=here), BrokenStop(command, cwd=here)]
    timer = _ctrl_c_when(lambda: _registered(tmp_path, 3))
    with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
        start_providers(providers, 30)
    timer.join()
    assert servers_in(tmp_path) == set()


def test_ctrl_c_while_pool_sessions_wait_for_capacity_ends_the_waits(server_factory: Any) -> None:
    from openenv.sync import EnvPool

    server = server_factory(CounterEnv, max_sessions=2)
    hog = Env(server.url)
    hog.connect()
    other = Env(server.url)
    other.connect()  # the server stays full: the pool's sessions wait up to capacity_timeout
    pool = EnvPool(server.url, size=2, capacity_timeout=60.0)
    waiting = pool.envs
    # Ctrl-C once the pool's sessions are in their capacity wait: the in-process server has refused
    # them three times (each session once, then a retry), whatever the machine's load
    refusals = _Refusals(3)
    server_log = logging.getLogger("openenv.server")
    level = server_log.level
    server_log.setLevel(logging.INFO)
    server_log.addHandler(refusals)
    try:
        with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
            pool.connect()
        assert refusals.fired
        # the sessions being opened were closed (their waits ended); the pool has fresh clients
        assert all(env.closed for env in waiting)
        assert not any(env is old for env, old in zip(pool.envs, waiting, strict=True))
        assert [t.name for t in threading.enumerate() if t.name.startswith("openenv-run-all")] == []
        assert hog.connected and other.connected
        hog.close()
        other.close()
        pool.connect()  # the pool can still be opened once the server has room
        assert [r.observation["count"] for r in pool.reset()] == [0, 0]
    finally:
        server_log.removeHandler(refusals)
        server_log.setLevel(level)
        hog.close()
        other.close()
        pool.close()


def test_ctrl_c_while_a_pool_reset_waits_for_room_lets_go_of_its_sessions() -> None:
    # A server that refuses with the first reset (OpenEnv's): Ctrl-C once the pool has let go of the session
    # it had reset (past the quick retries) and both wait: both stay failed, with fresh clients, none left open
    from openenv.sync import EnvPool

    from .envs import RefusingAtResetServer

    def interrupt(refused: int) -> None:
        if refused == 6:  # the pool's connect, three retries, then both sessions together: past the let-go
            _thread.interrupt_main()

    server = RefusingAtResetServer(capacity=2)
    blocker = EnvPool(server.url, size=1)
    pool = EnvPool(server.url, size=2, capacity_timeout=60)
    try:
        blocker.reset()
        pool.connect()  # both WebSockets are taken; the second is refused with its first reset
        waiting = pool.envs
        server.on_refused = interrupt
        with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
            pool.reset()
        assert server.refused >= 6
        assert all(env.closed for env in waiting)
        assert not any(env is old for env, old in zip(pool.envs, waiting, strict=True))
        assert [t.name for t in threading.enumerate() if t.name.startswith("openenv-run-all")] == []
        deadline = time.monotonic() + 10
        while server.active != 1 and time.monotonic() < deadline:  # the blocker's: nothing of the pool's
            time.sleep(0.02)
        assert server.active == 1
        assert pool.metrics.active == 0  # both failed
        blocker.close()
        assert [r.observation["kwargs"]["n"] for r in pool.reset(kwargs={"n": 1})] == [1, 1]
    finally:
        pool.close()
        blocker.close()
        server.close()


class _Refusals(logging.Handler):
    """Interrupts the main thread (Ctrl-C) at the ``count``-th "refusing a session" log record."""

    def __init__(self, count: int) -> None:
        super().__init__(logging.DEBUG)
        self._left = count
        self.fired = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.fired or not record.getMessage().startswith("refusing a session"):
            return
        self._left -= 1
        if self._left == 0:
            self.fired = True
            _thread.interrupt_main()


TLS_CONNECTS = 1000


def test_wss_connects_to_a_tls13_server_that_sends_session_tickets(tls_files: Any) -> None:
    """TLS 1.3 session tickets, read by websockets' reader thread while the caller writes the upgrade,
    used to lose about one upgrade in 250 (a ``ConnectTimeout`` after the whole ``connect_timeout``)."""
    from openenv.server import EnvServer

    context = tls_files.server_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    assert context.num_tickets >= 1
    client = ssl.create_default_context(cafile=tls_files.ca)

    def connect_once(i: int) -> str | None:
        try:
            with Env(server.url, verify=client, connect_timeout=5) as env:
                env.state()
        except Exception as exc:
            return f"connect {i}: {type(exc).__name__}: {exc}"
        return None

    with EnvServer(CounterEnv, port=0, max_sessions=8, ssl=context) as server:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            failures = [f for f in pool.map(connect_once, range(TLS_CONNECTS)) if f]
    assert failures == []


def test_an_overloaded_server_refusing_mid_handshake_gives_a_connect_error(caplog: Any) -> None:
    """``EnvServer`` beyond ``max_pending`` answers 503 and closes before reading the upgrade request.

    websockets' sync client then sometimes failed on an internal assertion (``ConnectError: ...
    AssertionError:``) and logged "unexpected internal error" (``Bad file descriptor``).
    """
    import logging
    import socket

    from openenv.server import EnvServer
    from openenv.sync import ConnectError

    def connect_once(i: int) -> str:
        try:
            with Env(server.url, connect_timeout=10) as env:
                env.state()
        except ConnectError as exc:
            return str(exc)
        return "connected"

    caplog.set_level(logging.ERROR, logger="openenv.websockets")
    with EnvServer(CounterEnv, port=0, max_pending=1, handshake_timeout=60) as server:
        with socket.create_connection((server.host, server.port)):  # holds the one pending slot
            until(lambda: server.pending_connections == 1)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                outcomes = list(pool.map(connect_once, range(400)))
    assert "connected" not in outcomes
    assert [o for o in outcomes if "AssertionError" in o] == []
    assert {o.split(" refused ")[0].split(" closed ")[0] for o in outcomes} == {f"the server at {server.ws_url}"}
    refused = [o for o in outcomes if "HTTP 503" in o]
    assert all("Too many pending connections" in o for o in refused)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("openenv.websockets")] == []


def test_taking_sessions_is_atomic_across_threads() -> None:
    """``checkout()`` may run on any thread beside a pool call: the pool (the IO layer) holds the lock, not its core."""
    from openenv.sync import EnvPool, SessionBusy

    pool: EnvPool[Any, Any, Any] = EnvPool("http://127.0.0.1:9", size=2)  # nothing is opened until connect()
    taken: list[int] = []
    with pool._lock:  # as a step() does while it checks its sessions and queues their requests
        thread = threading.Thread(target=lambda: taken.append(pool.envs.index(pool.checkout().__enter__())))
        thread.start()
        thread.join(0.2)
        assert thread.is_alive() and taken == []  # waits for the lock
    thread.join()
    assert taken == [0]
    with pytest.raises(SessionBusy, match="checked out"):
        pool.step([{}, {}])  # refused before anything is sent (nothing listens on port 9)
    pool.close()


def test_the_readers_close_race_is_not_logged_as_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    """websockets 15/16's reader thread logs "unexpected internal error" (EOFError: stream ended) when a connection
    closed from another thread (an abandoned call, Ctrl-C) still had bytes to feed: dropped; other errors pass."""
    from openenv._adapters import ws_logger

    logger = ws_logger()  # what our connections log through (``logger=`` of websockets' connect)
    caplog.set_level(logging.ERROR, logger=logger.name)
    for exc in (EOFError("stream ended"), EOFError("other"), RuntimeError("stream ended")):
        try:
            raise exc
        except Exception:
            logger.error("unexpected internal error", exc_info=True)  # as websockets' recv_events does
    logged = [r.exc_info[1] for r in caplog.records if r.name == logger.name and r.exc_info]
    assert [repr(e) for e in logged] == ["EOFError('other')", "RuntimeError('stream ended')"]


def test_ctrl_c_while_failed_sessions_are_replaced_at_once_ends_every_replacement(server_factory: Any) -> None:
    """Ctrl-C while four replacement handshakes wait on a server that stopped answering: they end at once,
    the sessions stay failed with fresh clients, nothing is left open, and the pool resets once it answers."""
    from openenv.sync import EnvPool

    from . import leaks
    from .faultproxy import FaultProxy

    proxy = FaultProxy(server_factory(CounterEnv, max_sessions=8).port)
    pool = EnvPool(proxy.url, size=4, on_failure="replace", replace_attempts=1, connect_timeout=120)
    try:
        pool.reset()
        before = leaks.snapshot()
        old = pool.envs
        proxy.blackhole = True
        proxy.drop()
        watcher = _ctrl_c_when(lambda: proxy.open_connections() == 4)  # every replacement under way
        start = time.monotonic()
        with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
            pool.step([{}] * 4)
        watcher.join()
        assert time.monotonic() - start < 60  # the interrupt, not connect_timeout
        assert [t.name for t in threading.enumerate() if t.name.startswith("openenv-run-all")] == []
        until(lambda: proxy.open_connections() == 0)  # every handshake ended
        assert not any(env is was for env, was in zip(pool.envs, old, strict=True))  # fresh clients
        assert not any(env.connected for env in pool.envs)
        assert pool.metrics.active == 0  # all four failed
        leaks.assert_no_leaks(before)
        proxy.blackhole = False
        assert len(pool.reset()) == 4
        assert pool.metrics.active == 4
    finally:
        pool.close()
        proxy.close()


def test_ctrl_c_while_servers_are_restarted_at_once_keeps_the_sessions_already_replaced(tmp_path: Path) -> None:
    """Two sessions on servers of their own die; session 0's new server comes up, session 1's never answers:
    Ctrl-C once session 0 is replaced stops session 1's new server only, and session 0 steps on."""

    from openenv.sync import EnvPool, ProcessProvider

    from .envs import one_replacement_never_listens
    from .leaks import alive

    factory = one_replacement_never_listens(ProcessProvider, tmp_path)  # session 1's second server hangs
    pool = EnvPool.from_provider(factory, size=2, ready_timeout=120, on_failure="replace", replace_attempts=1)
    try:
        pool.reset()
        for provider in pool.providers:
            assert isinstance(provider, ProcessProvider) and provider.pid is not None
            os.kill(provider.pid, signal.SIGKILL)
        watcher = _ctrl_c_when(lambda: pool.metrics.replacements == 1 and servers_in(tmp_path / "s1-2") != set())
        with ctrl_c_never_lost(), pytest.raises(KeyboardInterrupt):
            pool.step([{"message": "a"}, {"message": "b"}])
        watcher.join()
        until(lambda: servers_in(tmp_path / "s1-2") == set())  # session 1's new server: stopped
        replaced = pool.providers[0]
        assert isinstance(replaced, ProcessProvider) and replaced.pid is not None
        assert alive(replaced.pid)  # session 0's: kept
        assert servers_in(tmp_path / "s0-2") == {replaced.pid}
        [result] = pool.step([{"message": "still here"}], ids=[0])
        assert result.observation["echoed_message"] == "still here"
        assert pool.metrics.active == 1
    finally:
        pool.close()
    assert all(servers_in(where) == set() for where in tmp_path.iterdir())
