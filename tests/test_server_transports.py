"""Where environments run on each transport (issue 21): on the loop, or on a worker thread per session.

The rest of the server suite runs on the default transport, and on the other
one with ``OPENENV_SERVER_TRANSPORT=threads``; these tests name the transport
explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from websockets.asyncio.client import connect as aconnect
from websockets.sync.client import ClientConnection, connect

import openenv.sync
from openenv._core.capacity import waits_for_capacity
from openenv._core.errors import CapacityReached, ConnectError
from openenv.server import Action, Environment, EnvServer, Observation, State
from openenv.server._session import async_method
from openenv.server.echo import EchoEnvironment
from openenv.server.protocol import runs_on_loop

from .envs import IN_TIME
from .helpers_sync import until

TRANSPORTS = ["asyncio", "threads"]


class WhereObservation(Observation):
    thread: str = ""
    message: str = ""


class WhereAction(Action):
    message: str = ""


class _Where(Environment[WhereAction, WhereObservation, State]):
    """Reports the thread each call ran on; ``message == "block"`` waits for ``released``."""

    action_type = WhereAction
    observation_type = WhereObservation
    released: ClassVar[threading.Event]
    entered: ClassVar[threading.Event]

    def __init__(self) -> None:
        self._state = State(step_count=0)

    def reset(self, **kwargs: Any) -> WhereObservation:
        return WhereObservation(thread=threading.current_thread().name)

    def step(self, action: WhereAction) -> WhereObservation:
        if action.message == "block":
            type(self).entered.set()
            assert type(self).released.wait(30)
        return WhereObservation(thread=threading.current_thread().name, message=action.message)

    @property
    def state(self) -> State:
        return self._state


class BlockingEnv(_Where):
    released = threading.Event()
    entered = threading.Event()


class InlineEnv(_Where):
    blocking = False
    released = threading.Event()
    entered = threading.Event()


class AsyncEnv(Environment[WhereAction, WhereObservation, State]):
    """``async def`` reset/step: awaited on the loop (a loop of its own per call on a thread)."""

    action_type = WhereAction
    observation_type = WhereObservation

    def __init__(self) -> None:
        self._state = State(step_count=0)

    async def reset(self, **kwargs: Any) -> WhereObservation:  # type: ignore[override]
        await asyncio.sleep(0)
        return WhereObservation(thread=threading.current_thread().name)

    async def step(self, action: WhereAction) -> WhereObservation:  # type: ignore[override]
        await asyncio.sleep(0)
        self._state.step_count += 1
        return WhereObservation(thread=threading.current_thread().name, message=action.message)

    @property
    def state(self) -> State:
        return self._state


class StepAsyncEnv(InlineEnv):
    """OpenEnv's ``step_async``: preferred to ``step`` on the loop."""

    blocking = True  # only step_async makes it run on the loop

    async def step_async(self, action: WhereAction) -> WhereObservation:
        return WhereObservation(thread=threading.current_thread().name, message="async:" + action.message)


class MixedEnv(_Where):
    """An ``async def step`` beside a plain ``reset`` that blocks (``reset(block=True)`` waits for ``released``)."""

    released = threading.Event()
    entered = threading.Event()

    def reset(self, **kwargs: Any) -> WhereObservation:
        if kwargs.get("block"):
            type(self).entered.set()
            assert type(self).released.wait(30)
        return WhereObservation(thread=threading.current_thread().name)

    async def step(self, action: WhereAction) -> WhereObservation:  # type: ignore[override]
        await asyncio.sleep(0)
        return WhereObservation(thread=threading.current_thread().name, message=action.message)


class MixedCloseEnv(MixedEnv):
    """A mixed environment whose ``async def close`` awaits what its coroutines made on the server's loop."""

    closed: ClassVar[list[str]] = []

    async def step(self, action: WhereAction) -> WhereObservation:  # type: ignore[override]
        self._made: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        return WhereObservation(thread=threading.current_thread().name, message=action.message)

    async def close(self) -> None:  # type: ignore[override]
        self._made.set_result(None)
        await self._made  # on another loop: "The future belongs to a different loop"
        type(self).closed.append(threading.current_thread().name)


def _core_default(name: str) -> Any:
    """A coroutine shaped as openenv-core's ``Environment.<name>``: it only calls the plain method."""

    async def default(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, name.removesuffix("_async"))(*args, **kwargs)

    default.__module__ = "openenv.core.env_server.interfaces"
    default.__qualname__ = f"Environment.{name}"
    return default


class CoreDefaultsEnv(BlockingEnv):
    """openenv-core's base gives every environment ``reset_async``/``step_async`` that call the blocking methods."""

    reset_async = _core_default("reset_async")
    step_async = _core_default("step_async")


class MadeEnv(_Where):
    """A blocking environment bound to the thread that made it (as a browser or a simulator can be).

    Each reply says ``"<made on> <ran on>"`` (thread idents); ``close()`` records the same pair.
    """

    released = threading.Event()
    entered = threading.Event()
    closed: ClassVar[list[tuple[int, int]]] = []

    def __init__(self) -> None:
        super().__init__()
        self.made_on = threading.get_ident()

    def _where(self, message: str = "") -> WhereObservation:
        return WhereObservation(thread=f"{self.made_on} {threading.get_ident()}", message=message)

    def reset(self, **kwargs: Any) -> WhereObservation:
        return self._where()

    def step(self, action: WhereAction) -> WhereObservation:
        return self._where(action.message)

    def close(self) -> None:
        type(self).closed.append((self.made_on, threading.get_ident()))


class MadeMixedEnv(MadeEnv):
    """The same with an ``async def step`` (on the loop): its plain methods run on a thread of the session's own."""

    async def step(self, action: WhereAction) -> WhereObservation:  # type: ignore[override]
        return self._where(action.message)


def made_and_ran(ws: ClientConnection, frame: dict[str, Any]) -> tuple[str, str]:
    """``(made on, ran on)`` of one reply of a `MadeEnv` session."""
    made, ran = _ask(ws, frame)["data"]["observation"]["thread"].split()
    return made, ran


@pytest.fixture
def serve() -> Iterator[Callable[..., EnvServer]]:
    started: list[EnvServer] = []

    def start(factory: Any, transport: str, **kwargs: Any) -> EnvServer:
        server = EnvServer(factory, max_sessions=kwargs.pop("max_sessions", 8), transport=transport, **kwargs)  # type: ignore[arg-type]
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()


def _ask(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return reply


def _step(ws: ClientConnection, message: str) -> dict[str, Any]:
    observation: dict[str, Any] = _ask(ws, {"type": "step", "data": {"message": message}})["data"]["observation"]
    observation.pop("metadata", None)
    return observation


def test_runs_on_loop_contract() -> None:
    assert runs_on_loop(EchoEnvironment) and runs_on_loop(EchoEnvironment())
    assert runs_on_loop(InlineEnv) and runs_on_loop(AsyncEnv) and runs_on_loop(StepAsyncEnv)
    assert not runs_on_loop(BlockingEnv) and not runs_on_loop(BlockingEnv())
    assert runs_on_loop(MixedEnv)  # its step is awaited on the loop, its reset runs on a thread


def test_openenv_cores_default_async_methods_leave_an_environment_blocking() -> None:
    # the released server awaits reset_async/step_async only where a subclass overrides its base's defaults
    assert not runs_on_loop(CoreDefaultsEnv) and not runs_on_loop(CoreDefaultsEnv())
    assert async_method(CoreDefaultsEnv(), "step") is None and async_method(CoreDefaultsEnv(), "reset") is None

    class Overridden(CoreDefaultsEnv):
        async def step_async(self, action: WhereAction) -> WhereObservation:
            return WhereObservation(message="async:" + action.message)

    assert runs_on_loop(Overridden) and async_method(Overridden(), "step") is not None
    assert async_method(Overridden(), "reset") is None  # still the base's: reset runs on a thread


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_blocked_step_under_openenv_cores_default_async_methods_stalls_only_its_session(
    serve: Callable[..., EnvServer], transport: str
) -> None:
    CoreDefaultsEnv.released = threading.Event()
    CoreDefaultsEnv.entered = threading.Event()
    server = serve(CoreDefaultsEnv, transport)
    with connect(server.ws_url) as slow, connect(server.ws_url) as fast:
        slow.send(json.dumps({"type": "step", "data": {"message": "block"}}))
        assert CoreDefaultsEnv.entered.wait(30)
        assert _step(fast, "1")["message"] == "1"  # answered while the other session's step is blocked
        CoreDefaultsEnv.released.set()
        assert json.loads(slow.recv(timeout=30))["data"]["observation"]["message"] == "block"


def test_a_plain_reset_beside_an_async_step_runs_on_a_thread_and_stalls_no_session(
    serve: Callable[..., EnvServer],
) -> None:
    MixedEnv.released.clear()
    MixedEnv.entered.clear()
    server = serve(MixedEnv, "asyncio")
    loop_thread = f"openenv-server-{server.port}"
    with connect(server.ws_url) as slow, connect(server.ws_url) as fast:
        thread = _ask(fast, {"type": "reset"})["data"]["observation"]["thread"]
        assert thread != loop_thread
        assert _step(fast, "0") == {"thread": loop_thread, "message": "0"}  # the coroutine: on the loop
        # every plain call of a session on its one thread (thread-bound resources), as the released server
        assert _ask(fast, {"type": "reset"})["data"]["observation"]["thread"] == thread
        assert _ask(slow, {"type": "reset"})["data"]["observation"]["thread"] not in (thread, loop_thread)
        slow.send(json.dumps({"type": "reset", "data": {"block": True}}))
        assert MixedEnv.entered.wait(30)
        for n in range(3):  # answered while the other session's reset is blocked
            assert _step(fast, str(n))["message"] == str(n)
        MixedEnv.released.set()
        assert json.loads(slow.recv(timeout=30))["type"] == "observation"


def test_non_blocking_envs_run_on_the_loop_thread(serve: Callable[..., EnvServer]) -> None:
    for factory in (InlineEnv, AsyncEnv, EchoEnvironment, lambda: InlineEnv()):
        server = serve(factory, "asyncio")
        with connect(server.ws_url) as ws:
            if factory is EchoEnvironment:
                assert _ask(ws, {"type": "reset"})["type"] == "observation"
                continue
            assert _ask(ws, {"type": "reset"})["data"]["observation"]["thread"] == f"openenv-server-{server.port}"
            assert _step(ws, "hi") == {"thread": f"openenv-server-{server.port}", "message": "hi"}


def test_step_async_is_awaited_on_the_loop(serve: Callable[..., EnvServer]) -> None:
    server = serve(StepAsyncEnv, "asyncio")
    with connect(server.ws_url) as ws:
        assert _step(ws, "x") == {"thread": f"openenv-server-{server.port}", "message": "async:x"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_envs_work_on_every_transport(serve: Callable[..., EnvServer], transport: str) -> None:
    server = serve(AsyncEnv, transport)
    with openenv.sync.Env(server.url) as env:
        env.reset()
        assert env.step({"message": "a"}).observation["message"] == "a"
        assert env.step({"message": "b"}).observation["message"] == "b"
        assert env.state()["step_count"] == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_blocking_env_is_made_used_and_closed_on_its_sessions_thread(
    serve: Callable[..., EnvServer], transport: str
) -> None:
    MadeEnv.closed.clear()
    server = serve(MadeEnv, transport)
    with connect(server.ws_url) as ws:
        made, ran = made_and_ran(ws, {"type": "reset"})
        assert ran == made
        assert made_and_ran(ws, {"type": "step", "data": {"message": "x"}}) == (made, made)
    until(lambda: MadeEnv.closed == [(int(made), int(made))])


def test_blocking_env_gets_a_worker_thread_per_session(serve: Callable[..., EnvServer]) -> None:
    server = serve(BlockingEnv, "asyncio")
    with connect(server.ws_url) as a, connect(server.ws_url) as b:
        thread_a, thread_b = _step(a, "1")["thread"], _step(b, "2")["thread"]
        assert thread_a != thread_b
        assert f"openenv-server-{server.port}" not in (thread_a, thread_b)
        assert _step(a, "3")["thread"] == thread_a  # the same thread for every call of a session


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_blocked_step_stalls_only_its_session(serve: Callable[..., EnvServer], transport: str) -> None:
    BlockingEnv.released.clear()
    BlockingEnv.entered.clear()
    server = serve(BlockingEnv, transport)
    with connect(server.ws_url) as slow, connect(server.ws_url) as fast:
        slow.send(json.dumps({"type": "step", "data": {"message": "block"}}))
        assert BlockingEnv.entered.wait(30)
        for n in range(5):  # answered while the other session's step is still blocked
            assert _step(fast, str(n))["message"] == str(n)
        assert server.active_sessions == 2
        BlockingEnv.released.set()
        assert json.loads(slow.recv(timeout=30))["data"]["observation"]["message"] == "block"


class GatedEnv(_Where):
    """Every step waits at a barrier of all sessions, so their workers finish together."""

    barrier: ClassVar[threading.Barrier]

    def step(self, action: WhereAction) -> WhereObservation:
        type(self).barrier.wait(30)
        return WhereObservation(thread=threading.current_thread().name, message=action.message)


def test_blocking_sessions_finishing_at_once_each_get_their_own_reply(serve: Callable[..., EnvServer]) -> None:
    # The workers hand their results to the loop together (one wake-up for those that arrive at once).
    sessions, rounds = 12, 15
    GatedEnv.barrier = threading.Barrier(sessions)
    server = serve(GatedEnv, "asyncio", max_sessions=sessions)

    async def main() -> list[list[str]]:
        async with contextlib.AsyncExitStack() as stack:
            sockets = [await stack.enter_async_context(aconnect(server.ws_url)) for _ in range(sessions)]

            async def one(ws: Any, i: int, n: int) -> str:
                await ws.send(json.dumps({"type": "step", "data": {"message": f"{i}-{n}"}}))
                reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
                return str(reply["data"]["observation"]["message"])

            return [await asyncio.gather(*(one(ws, i, n) for i, ws in enumerate(sockets))) for n in range(rounds)]

    answers = asyncio.run(main())
    assert answers == [[f"{i}-{n}" for i in range(sessions)] for n in range(rounds)]


def test_stop_waits_for_a_blocked_step_and_joins_its_worker(serve: Callable[..., EnvServer]) -> None:
    BlockingEnv.released.clear()
    BlockingEnv.entered.clear()
    server = serve(BlockingEnv, "asyncio")
    with connect(server.ws_url) as ws:
        ws.send(json.dumps({"type": "step", "data": {"message": "block"}}))
        assert BlockingEnv.entered.wait(30)
        stopper = threading.Thread(target=server.stop)
        stopper.start()
        stopper.join(0.2)
        assert stopper.is_alive()  # still waiting for the step
        BlockingEnv.released.set()
        stopper.join(30)
        assert not stopper.is_alive()
        assert not [t for t in threading.enumerate() if t.name.startswith(f"openenv-session-{server.port}")]
        assert server.active_sessions == 0


def test_asyncio_sessions_cost_no_thread(serve: Callable[..., EnvServer]) -> None:
    server = serve(EchoEnvironment, "asyncio", max_sessions=32)
    before = threading.active_count()

    async def main() -> int:
        async with contextlib.AsyncExitStack() as stack:
            sockets = [await stack.enter_async_context(aconnect(server.ws_url)) for _ in range(32)]
            for ws in sockets:
                await ws.send(json.dumps({"type": "reset"}))
                assert json.loads(await ws.recv())["type"] == "observation"
            assert server.active_sessions == 32
            return threading.active_count()

    assert asyncio.run(main()) == before  # the clients share this thread; the server adds none


def test_transport_and_pending_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_SERVER_TRANSPORT", raising=False)
    assert EnvServer(EchoEnvironment).transport == "asyncio"
    assert EnvServer(EchoEnvironment, max_sessions=512).max_pending == 1024
    assert EnvServer(EchoEnvironment, max_sessions=8).max_pending == 64
    assert EnvServer(EchoEnvironment, max_sessions=512, max_pending=10).max_pending == 10
    monkeypatch.setenv("OPENENV_SERVER_TRANSPORT", "threads")
    assert EnvServer(EchoEnvironment).transport == "threads"
    with pytest.raises(ValueError, match="transport must be"):
        EnvServer(EchoEnvironment, transport="trio")  # type: ignore[arg-type]


def test_overloaded_handshakes_are_waited_for() -> None:
    refused = ConnectError("refused with HTTP 503")
    refused.status = 503
    assert waits_for_capacity(refused)
    assert waits_for_capacity(CapacityReached("full", "CAPACITY_REACHED"))
    forbidden = ConnectError("refused with HTTP 403")
    forbidden.status = 403
    assert not waits_for_capacity(forbidden) and not waits_for_capacity(ConnectError("reset"))
    assert not waits_for_capacity(None)


def test_pool_opens_past_the_pending_cap(serve: Callable[..., EnvServer]) -> None:
    # 16 handshakes at once against a cap of 1: the refused ones (HTTP 503) are retried with backoff.
    # (The threading transport answers 503 before reading the request, so its clients may see a reset.)
    server = serve(EchoEnvironment, "asyncio", max_sessions=16, max_pending=1)
    with openenv.sync.EnvPool(server.url, size=16, capacity_timeout=60) as pool:
        results = pool.reset()
        assert len(results) == 16
        assert all(r.observation["echoed_message"] == "hi" for r in pool.step([{"message": "hi"}] * 16))


# --------------------------------------------------------------------------- the ASGI app


def test_asgi_runs_non_blocking_envs_on_its_loop(asgi_server_factory: Callable[..., Any]) -> None:
    for factory in (InlineEnv, AsyncEnv, StepAsyncEnv):
        server = asgi_server_factory(factory, max_sessions=2)
        loop_thread = server._thread.name
        with connect(server.url.replace("http", "ws") + "/ws") as ws:
            reset_thread = _ask(ws, {"type": "reset"})["data"]["observation"]["thread"]
            # StepAsyncEnv's reset is a plain method (and it does not say blocking = False): on a thread
            assert (reset_thread == loop_thread) is (factory is not StepAsyncEnv)
            expected = "async:x" if factory is StepAsyncEnv else "x"
            assert _step(ws, "x") == {"thread": loop_thread, "message": expected}
        server.stop()


def test_a_mixed_environments_async_close_runs_on_the_loop_its_coroutines_ran_on(
    serve: Callable[..., EnvServer], asgi_server_factory: Callable[..., Any]
) -> None:
    MixedCloseEnv.closed = []
    server = serve(MixedCloseEnv, "asyncio")
    with connect(server.ws_url) as ws:
        _ask(ws, {"type": "reset"})
        _step(ws, "x")
    asgi = asgi_server_factory(MixedCloseEnv, max_sessions=1)
    with connect(asgi.url.replace("http", "ws") + "/ws") as ws:
        _ask(ws, {"type": "reset"})
        _step(ws, "x")
    until(lambda: len(MixedCloseEnv.closed) == 2)
    assert MixedCloseEnv.closed == [f"openenv-server-{server.port}", asgi._thread.name]


def test_asgi_runs_a_plain_reset_beside_an_async_step_on_the_sessions_thread(
    asgi_server_factory: Callable[..., Any],
) -> None:
    MixedEnv.released.clear()
    MixedEnv.entered.clear()
    server = asgi_server_factory(MixedEnv, max_sessions=2)
    loop_thread = server._thread.name
    url = server.url.replace("http", "ws") + "/ws"
    with connect(url) as slow, connect(url) as fast:
        thread = _ask(fast, {"type": "reset"})["data"]["observation"]["thread"]
        assert thread != loop_thread and _ask(fast, {"type": "reset"})["data"]["observation"]["thread"] == thread
        assert _step(fast, "0") == {"thread": loop_thread, "message": "0"}
        slow.send(json.dumps({"type": "reset", "data": {"block": True}}))
        assert MixedEnv.entered.wait(30)
        assert _step(fast, "1")["message"] == "1"  # answered while the other session's reset is blocked
        MixedEnv.released.set()
        assert json.loads(slow.recv(timeout=30))["type"] == "observation"


def test_asgi_gives_blocking_envs_a_thread_per_session(asgi_server_factory: Callable[..., Any]) -> None:
    BlockingEnv.released.clear()
    BlockingEnv.entered.clear()
    server = asgi_server_factory(BlockingEnv, max_sessions=2)
    url = server.url.replace("http", "ws") + "/ws"
    with connect(url) as slow, connect(url) as fast:
        threads = {_step(slow, "1")["thread"], _step(fast, "2")["thread"]}
        assert len(threads) == 2 and server._thread.name not in threads
        slow.send(json.dumps({"type": "step", "data": {"message": "block"}}))
        assert BlockingEnv.entered.wait(30)
        assert _step(fast, "3")["message"] == "3"  # answered while the other session is blocked
        BlockingEnv.released.set()
        assert json.loads(slow.recv(timeout=30))["data"]["observation"]["message"] == "block"


# ------------------------------------------- no request runs blocking work on a loop (issue 32)


class SlowStartEnv(_Where):
    """Blocking, and its constructor waits for ``released`` while ``armed`` is set (a simulator that loads)."""

    armed = threading.Event()
    released = threading.Event()
    entered = threading.Event()

    def __init__(self) -> None:
        super().__init__()
        if type(self).armed.is_set():
            type(self).entered.set()
            assert type(self).released.wait(30)


#: (method, path, body): every route that may build an environment.  The embedded server serves only the GETs.
_GETS: list[tuple[str, str, bytes | None]] = [
    ("GET", "/state", None),
    ("GET", "/metadata", None),
    ("GET", "/schema", None),
]
_POSTS: list[tuple[str, str, bytes | None]] = [
    ("POST", "/reset", b"{}"),
    ("POST", "/step", b'{"action": {"message": "x"}}'),
    ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'),
]


def _request(url: str, method: str, body: bytes | None, out: list[int]) -> None:
    import urllib.request

    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        out.append(response.status)


def _slow_route_leaves_others_fast(url: str, ws_url: str, method: str, path: str, body: bytes | None) -> None:
    """While ``method path`` waits in a constructor, another session's step is answered IN_TIME."""
    SlowStartEnv.armed.clear()
    SlowStartEnv.entered.clear()
    SlowStartEnv.released.clear()
    statuses: list[int] = []
    with connect(ws_url) as fast:
        assert _step(fast, "warm")["message"] == "warm"
        SlowStartEnv.armed.set()
        caller = threading.Thread(target=_request, args=(url + path, method, body, statuses))
        caller.start()
        try:
            assert SlowStartEnv.entered.wait(30)
            fast.send(json.dumps({"type": "step", "data": {"message": "during"}}))
            reply = json.loads(fast.recv(timeout=IN_TIME))  # TimeoutError when the route stalls the loop
            assert reply["data"]["observation"]["message"] == "during"
        finally:
            SlowStartEnv.armed.clear()
            SlowStartEnv.released.set()
            caller.join(60)
    assert statuses == [200]


def _slow_factory(path: str) -> Any:
    # /state builds an instance for any factory; /metadata and /schema only for one that is not a class
    return SlowStartEnv if path in ("/state", "/reset", "/step", "/mcp") else lambda: SlowStartEnv()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("method", "path", "body"), _GETS)
def test_a_route_building_a_blocking_env_stalls_no_session(
    serve: Callable[..., EnvServer], transport: str, method: str, path: str, body: bytes | None
) -> None:
    server = serve(_slow_factory(path), transport, max_sessions=2)
    _slow_route_leaves_others_fast(server.url, server.ws_url, method, path, body)


@pytest.mark.parametrize(("method", "path", "body"), _GETS + _POSTS)
def test_asgi_route_building_a_blocking_env_stalls_no_session(
    asgi_server_factory: Callable[..., Any], method: str, path: str, body: bytes | None
) -> None:
    server = asgi_server_factory(_slow_factory(path), max_sessions=2)
    _slow_route_leaves_others_fast(server.url, server.url.replace("http", "ws") + "/ws", method, path, body)


def test_get_may_block_follows_the_session_contract() -> None:
    from openenv.server.protocol import EnvProtocol

    blocking, inline, made = EnvProtocol(BlockingEnv), EnvProtocol(InlineEnv), EnvProtocol(lambda: InlineEnv())
    assert blocking.get_may_block("/state") and not inline.get_may_block("/state") and made.get_may_block("/state")
    assert not blocking.get_may_block("/metadata") and not blocking.get_may_block("/schema")
    assert made.get_may_block("/metadata") and made.get_may_block("/schema")
    assert not made.get_may_block("/health") and not made.get_may_block("/nope")
    made.env_class()  # found once: from here on the descriptions need no instance
    assert not made.get_may_block("/metadata") and not made.get_may_block("/schema")


def test_stop_closes_sockets_accepted_while_it_shuts_down() -> None:
    """Sockets the listener accepts as ``stop()`` begins are closed, their handlers awaited, before the loop closes.

    The loop is held while clients connect (the kernel queues them) and ``stop()`` is posted, so the
    accepts and the shutdown run in the same loop iterations: without the drain, a late
    ``connection_made`` started a handler (in handshake) after websockets stopped waiting for handlers,
    and the loop closed with it pending ("Task was destroyed but it is pending!", its socket unclosed).
    """
    import gc
    import logging
    import socket
    import warnings

    srv = EnvServer(EchoEnvironment, transport="asyncio").start()
    from openenv.server._aio import AsyncioTransport

    aio = srv._server
    assert isinstance(aio, AsyncioTransport)
    loop, stop = aio._loop, aio._stop
    assert loop is not None and stop is not None
    gate, held = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        gate.wait()

    records: list[logging.LogRecord] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = _Keep()
    logging.getLogger("asyncio").addHandler(handler)
    clients = []
    try:
        loop.call_soon_threadsafe(hold)  # hold the loop: connects queue in the backlog
        assert held.wait(IN_TIME)
        for _ in range(20):
            client = socket.create_connection(("127.0.0.1", srv.port), timeout=IN_TIME)
            client.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\n")  # a handshake in flight
            clients.append(client)
        loop.call_soon_threadsafe(stop.set)
        gate.set()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            srv.stop()
            gc.collect()
    finally:
        gate.set()
        logging.getLogger("asyncio").removeHandler(handler)
        for client in clients:
            client.close()
        srv.stop()
    assert loop.is_closed()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert [r.getMessage() for r in records if "pending" in r.getMessage()] == []
