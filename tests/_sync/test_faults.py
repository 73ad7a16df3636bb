# GENERATED from tests/_async/test_faults.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The fault suite: real processes, sockets and a TCP proxy on loopback (written once, generated for the sync twin).

Each test injects one fault, asserts the exception, what later calls do (as the
README says), and that nothing leaks (threads, fds, sockets, child processes).
Every wait is bounded; nothing sleeps longer than a fault needs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openenv._shim_sync import ws_pending
from openenv.sync import (
    CapacityReached,
    ConnectError,
    ConnectTimeout,
    DockerUnavailable,
    Env,
    MessageTimeout,
    MessageTooLarge,
    ProtocolError,
    SessionBusy,
    SessionLost,
    StepResult,
)

from .. import leaks
from ..envs import IN_TIME, TOO_LATE
from ..faultproxy import FaultProxy
from ..faultservers import RawServer, ServerProcess, cut_tcp, reply
from ..helpers_sync import assert_no_leaks, close_from_another_thread, gather, sleep, until


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    """The embedded server (CounterEnv) in its own process, on 127.0.0.1."""
    proc = ServerProcess("tests.envs:CounterEnv", 4).start()
    yield proc
    proc.stop()


@pytest.fixture
def proxy(server: ServerProcess) -> Iterator[FaultProxy]:
    fault_proxy = FaultProxy(server.port)
    yield fault_proxy
    fault_proxy.close()


@pytest.fixture
def raw_servers() -> Iterator[Any]:
    started: list[RawServer] = []

    def start(script: Any, **kwargs: Any) -> RawServer:
        raw = RawServer(script, **kwargs)
        started.append(raw)
        return raw

    yield start
    for raw in started:
        raw.close()


def _unread(env: Env) -> bool:
    """Whether a message waits on ``env``'s connection that no call has read."""
    ws = env._ws
    return ws is not None and ws_pending(ws)


def _reset_when_free(env: Env, **kwargs: Any) -> StepResult[Any]:
    """``reset`` once the server has freed a slot (it sees a dropped session a moment later)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return env.reset(**kwargs)
        except CapacityReached:
            if time.monotonic() > deadline:
                raise
            sleep(0.05)


# -- the server process ----------------------------------------------------------------------


def test_server_killed_between_steps(server: ServerProcess) -> None:
    before = leaks.snapshot()
    env = Env(server.url)
    env.reset(start=1)
    env.step({"delta": 1})
    server.kill()
    with pytest.raises(SessionLost, match="episode"):
        env.step({"delta": 1})
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 1})  # keeps saying so until reset()
    with pytest.raises(ConnectError, match="refused"):
        env.reset()  # nothing listens
    server.start()  # the same port
    assert (env.reset(start=5)).observation["count"] == 5
    assert (env.step({"delta": 1})).observation["count"] == 6
    env.close()
    assert_no_leaks(before)


def test_server_killed_mid_step(server: ServerProcess) -> None:
    before = leaks.snapshot()
    env = Env(server.url, message_timeout=30)
    env.reset(start=1)
    killer = threading.Timer(0.3, server.kill)
    killer.start()
    with pytest.raises(SessionLost) as info:
        env.step({"delta": 1, "sleep": 20})  # ends with the process, not with the timeout
    killer.join()
    assert not isinstance(info.value, MessageTimeout)
    assert not env.connected
    server.start()
    with pytest.raises(SessionLost):
        env.state()
    assert (env.reset(start=2)).observation["count"] == 2
    env.close()
    assert_no_leaks(before)


@pytest.mark.parametrize("call", ["reset", "step", "state"])
def test_restart_before_any_episode_reconnects_automatically(server: ServerProcess, call: str) -> None:
    before = leaks.snapshot()
    held = leaks.socket_inodes()
    env = Env(server.url).connect()
    session = leaks.socket_inodes() - held  # the session's socket
    assert session
    server.kill()
    server.start()  # same port, a new process
    # the client has seen the close (its socket is shut) before the call: it knows, and reconnects
    until(lambda: not session & leaks.socket_inodes())
    if call == "reset":
        assert (env.reset(start=3)).observation["count"] == 3
    elif call == "step":
        assert (env.step({"delta": 2})).observation["count"] == 2
    else:
        assert (env.state())["step_count"] == 0
    env.close()
    assert_no_leaks(before)


def test_restart_mid_episode_raises_session_lost_until_reset(server: ServerProcess) -> None:
    before = leaks.snapshot()
    env = Env(server.url)
    env.reset(start=1)
    server.kill()
    server.start()
    with pytest.raises(SessionLost, match="episode"):
        env.step({"delta": 1})  # never re-sent into a fresh, un-reset session
    with pytest.raises(SessionLost):
        env.state()
    assert (env.reset(start=4)).observation["count"] == 4
    assert (env.step({"delta": 1})).observation["count"] == 5
    env.close()
    assert_no_leaks(before)


def test_stalled_server_process_loses_the_episode_then_reset_gets_its_own_reply(server: ServerProcess) -> None:
    before = leaks.snapshot()
    env = Env(server.url, message_timeout=IN_TIME)
    env.reset(start=1)
    with pytest.raises(MessageTimeout, match=f"message_timeout={IN_TIME}"):
        env.step({"delta": 1, "sleep": TOO_LATE})  # the server answers, too late
    assert not env.connected
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 1})
    assert (_reset_when_free(env, start=7)).observation["count"] == 7
    assert (env.step({"delta": 1})).observation["count"] == 8
    env.close()
    assert_no_leaks(before)


def _stall_then_answer(answered: threading.Event) -> Callable[[Any, str, int], None]:
    """A handler that answers a frame saying ``stall`` past the client's message_timeout, then sets ``answered``."""

    def handle(ws: Any, frame: str, n: int) -> None:
        if "stall" in frame:
            try:
                time.sleep(TOO_LATE)
                reply(ws, frame, late=True)  # answer anyway
            finally:
                answered.set()
            return
        reply(ws, frame)

    return handle


@pytest.mark.parametrize("where", ["reset", "step"])
def test_a_late_reply_is_never_returned_to_a_later_call(raw_servers: Any, where: str) -> None:
    answered = threading.Event()
    raw = raw_servers(_stall_then_answer(answered))
    before = leaks.snapshot()
    env = Env(raw.url, message_timeout=IN_TIME)
    if where == "reset":
        with pytest.raises(MessageTimeout):
            env.reset(seed=1, stall=True)
    else:
        env.reset(seed=1)
        with pytest.raises(MessageTimeout):
            env.step({"delta": 1, "stall": True})
    result = env.reset(seed=2)  # a new connection: its own reply, never the late one
    assert result.observation == {"seed": 2, "delta": None}
    for delta in (3, 4):
        assert (env.step({"delta": delta})).observation == {"seed": None, "delta": delta}
    until(answered.is_set, timeout=TOO_LATE + 10)  # the late reply was written: still never seen
    assert (env.step({"delta": 5})).observation == {"seed": None, "delta": 5}
    env.close()
    raw.close()  # in-process: its sockets and threads go first
    assert_no_leaks(before)


# -- the connection closed by the server -----------------------------------------------------


def _close_on_first_step(how: Any) -> Any:
    done = threading.Event()

    def script(ws: Any, frame: str, n: int) -> None:
        if json.loads(frame)["type"] == "step" and not done.is_set():
            done.set()
            if how == "cut":
                cut_tcp(ws)
            else:
                ws.close(how, "test")
            return
        reply(ws, frame)

    return script


@pytest.mark.parametrize("how", [1000, 1009, 1011, "cut"])
def test_connection_closed_by_the_server(raw_servers: Any, how: Any) -> None:
    raw = raw_servers(_close_on_first_step(how))
    before = leaks.snapshot()
    env = Env(raw.url)
    env.reset(seed=1)
    expected = MessageTooLarge if how == 1009 else SessionLost
    with pytest.raises(expected) as info:
        env.step({"delta": 1})
    if how in (1000, 1011):
        assert str(how) in str(info.value)
    assert not env.connected
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 2})  # mid-episode: lost until reset()
    assert (env.reset(seed=3)).observation["seed"] == 3  # reconnects
    assert (env.step({"delta": 4})).observation["delta"] == 4
    env.close()
    raw.close()  # in-process: its sockets and threads go first
    assert_no_leaks(before)


def test_connection_closed_before_any_episode_reconnects(raw_servers: Any) -> None:
    raw = raw_servers(_close_on_first_step(1011))
    env = Env(raw.url)
    with pytest.raises(SessionLost, match="no episode"):
        env.step({"delta": 1})  # it was sent: never re-sent
    assert (env.step({"delta": 2})).observation["delta"] == 2  # nothing to lose: a fresh connection
    env.close()


# -- a TCP proxy of our own -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["fin", "rst"])
def test_proxy_cuts_the_connection_mid_frame(proxy: FaultProxy, how: Any) -> None:
    before = leaks.snapshot()
    env = Env(proxy.url, message_timeout=10)
    env.reset(start=1)
    proxy.cut(how, after=1000)  # 1000 bytes of a 200 kB frame, then FIN or RST
    with pytest.raises(SessionLost) as info:
        env.step({"delta": 1, "size": 200_000})
    assert not isinstance(info.value, MessageTimeout)
    assert proxy.cuts == 1
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 1})
    assert (_reset_when_free(env, start=2)).observation["count"] == 2
    env.close()
    proxy.close()  # in-process: its sockets and threads go first
    assert_no_leaks(before)


def test_proxy_black_holes_an_open_session(proxy: FaultProxy) -> None:
    before = leaks.snapshot()
    env = Env(proxy.url, message_timeout=IN_TIME, connect_timeout=IN_TIME)
    env.reset(start=1)
    proxy.blackhole = True
    with pytest.raises(MessageTimeout, match=f"message_timeout={IN_TIME}"):
        env.step({"delta": 1})
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 1})
    with pytest.raises(ConnectTimeout, match="connect_timeout"):
        env.reset()  # a new connection, accepted and never answered
    proxy.blackhole = False
    assert (_reset_when_free(env, start=3)).observation["count"] == 3
    env.close()
    proxy.close()  # the black-holed sockets are the proxy's, not the client's
    assert_no_leaks(before)


def test_proxy_black_holes_the_handshake(proxy: FaultProxy) -> None:
    proxy.blackhole = True
    before = leaks.snapshot()
    env = Env(proxy.url, connect_timeout=0.5)
    with pytest.raises(ConnectTimeout) as info:
        env.connect()
    assert "connect_timeout" in str(info.value)
    assert not env.connected
    env.close()
    proxy.close()
    assert_no_leaks(before)


def test_proxy_delays_every_packet(proxy: FaultProxy) -> None:
    proxy.delay = 0.02
    before = leaks.snapshot()
    with Env(proxy.url) as env:
        env.reset(start=1)
        for i in range(5):
            assert (env.step({"delta": 1})).observation["count"] == 2 + i
        assert (env.state())["step_count"] == 5
    proxy.close()
    assert_no_leaks(before)


# -- bad replies -----------------------------------------------------------------------------


def _bad_step_reply(kind: str) -> Any:
    def script(ws: Any, frame: str, n: int) -> None:
        if json.loads(frame)["type"] != "step" or n != 1:
            reply(ws, frame)
        elif kind == "wrong type":
            ws.send(json.dumps({"type": "state", "data": {"episode_id": "e", "step_count": 1}}))
        elif kind == "invalid JSON":
            ws.send('{"type": "observation", "data": {')
        elif kind == "binary":
            ws.send(b'{"type": "observation"}')
        else:  # oversized
            ws.send(json.dumps({"type": "observation", "data": {"observation": {"x": "y" * 50_000}}}))

    return script


@pytest.mark.parametrize("kind", ["wrong type", "invalid JSON", "binary", "oversized"])
def test_a_bad_reply_raises_protocol_error_and_drops_the_connection(raw_servers: Any, kind: str) -> None:
    raw = raw_servers(_bad_step_reply(kind))
    before = leaks.snapshot()
    env = Env(raw.url, max_message_size=10_000)
    env.reset(seed=1)  # frame 0
    with pytest.raises(MessageTooLarge if kind == "oversized" else ProtocolError):
        env.step({"delta": 1})  # frame 1
    assert not env.connected
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 2})
    assert (env.reset(seed=2)).observation["seed"] == 2
    assert (env.step({"delta": 3})).observation["delta"] == 3
    env.close()
    raw.close()  # in-process: its sockets and threads go first
    assert_no_leaks(before)


def test_two_replies_to_one_request_never_answer_the_next_call(raw_servers: Any) -> None:
    sent_both = threading.Event()

    def script(ws: Any, frame: str, n: int) -> None:
        reply(ws, frame)
        if n == 0:
            reply(ws, frame, duplicate=True)
            sent_both.set()

    raw = raw_servers(script)
    before = leaks.snapshot()
    env = Env(raw.url)
    assert (env.reset(seed=1)).observation == {"seed": 1, "delta": None}
    assert sent_both.wait(5)
    until(lambda: _unread(env))  # the duplicate reached the client's socket
    with pytest.raises(ProtocolError, match="answers no request"):
        env.step({"delta": 1})  # never answered with the duplicate
    assert not env.connected
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 1})
    assert (env.reset(seed=2)).observation == {"seed": 2, "delta": None}
    assert (env.step({"delta": 5})).observation == {"seed": None, "delta": 5}
    env.close()
    raw.close()  # in-process: its sockets and threads go first
    assert_no_leaks(before)


@pytest.mark.parametrize("kind", ["step", "state", "mcp"])
def test_a_late_duplicate_reply_is_the_next_calls_result_or_a_protocol_error(raw_servers: Any, kind: str) -> None:
    """The known limit, exactly: a duplicate that arrives *after* the next request was sent.

    Without request ids a duplicated ``step`` (or ``state``) reply is returned as the next call of that
    kind's result, and the ``ProtocolError`` comes one call later; an ``mcp`` reply (``list_tools``)
    carries its JSON-RPC id, so its duplicate is refused at once.
    """
    previous: list[str] = []

    def script(ws: Any, frame: str, n: int) -> None:
        message = json.loads(frame)
        if message["type"] == "mcp":
            rpc = message["data"]
            result = {"tools": [{"name": f"tool{rpc['id']}", "description": "", "inputSchema": {"type": "object"}}]}
            answer = json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": rpc["id"], "result": result}})
        elif message["type"] == "state":
            answer = json.dumps({"type": "state", "data": {"episode_id": "e", "step_count": n}})
        else:
            data = message.get("data") or {}
            echo = {"seed": data.get("seed"), "delta": data.get("delta")}
            answer = json.dumps({"type": "observation", "data": {"observation": echo, "reward": 0.0, "done": False}})
        if n == 2:  # the second call of the kind: the first one's reply comes again, before its own
            ws.send(previous[-1])
        ws.send(answer)
        previous.append(answer)

    def call(i: int) -> Any:
        if kind == "step":
            return (env.step({"delta": i})).observation["delta"]
        if kind == "state":
            return (env.state())["step_count"]
        return [tool.name for tool in env.list_tools(use_cache=False)]  # an mcp frame (tools/list)

    raw = raw_servers(script)
    before = leaks.snapshot()
    env = Env(raw.url)
    env.reset(seed=1)  # frame 0
    first = call(1)  # frame 1
    if kind == "mcp":
        with pytest.raises(ProtocolError, match="does not answer request id"):
            call(2)  # frame 2: the duplicate (id of frame 1) is refused at once
    else:
        assert call(2) == first  # frame 2: the duplicate of frame 1's reply is returned
        until(lambda: _unread(env))  # frame 2's own reply reached the client's socket
        with pytest.raises(ProtocolError, match="answers no request"):
            call(3)  # nothing sent: frame 2's reply is waiting, unasked for
    assert not env.connected
    with pytest.raises(SessionLost, match="reset"):
        env.step({"delta": 4})
    env.close()
    raw.close()  # in-process: its sockets and threads go first
    assert_no_leaks(before)


def test_a_refusal_sent_on_accept_is_the_reply_not_an_unsolicited_message() -> None:
    """OpenEnv's servers accept the WebSocket, send CAPACITY_REACHED at once, then close.

    With the client used as a context manager the socket is open before the first call: the
    refusal waiting on it is that call's answer (``CapacityReached``), not a
    stray reply (``ProtocolError``).
    """
    from websockets.sync.server import serve as ws_serve

    refusal = json.dumps(
        {
            "type": "error",
            "data": {"code": "CAPACITY_REACHED", "message": "at capacity", "active_sessions": 1, "max_sessions": 1},
        }
    )

    def handler(ws: Any) -> None:
        ws.send(refusal)
        time.sleep(0.3)
        ws.close()

    server = ws_serve(handler, "127.0.0.1", 0, compression=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with Env(f"http://127.0.0.1:{server.socket.getsockname()[1]}") as env:
            until(lambda: _unread(env))  # the refusal now waits on the fresh socket
            with pytest.raises(CapacityReached) as info:
                env.reset()
            assert info.value.max_sessions == 1
    finally:
        server.shutdown()
        thread.join(5)


# -- misuse ----------------------------------------------------------------------------------


def test_concurrent_callers_get_session_busy_and_never_a_desync(server: ServerProcess) -> None:
    before = leaks.snapshot()
    env = Env(server.url)
    env.reset()
    deltas = [1, 2, 3, 4, 5, 6]
    results = gather(
        *(lambda d=d: env.step({"delta": d, "sleep": 0.2}) for d in deltas),
        stagger=0.05,
    )
    ok = [(d, r) for d, r in zip(deltas, results, strict=True) if isinstance(r, StepResult)]
    busy = [r for r in results if isinstance(r, SessionBusy)]
    assert len(ok) + len(busy) == len(deltas), results
    assert ok and busy
    assert all(r.reward == d for d, r in ok)  # each caller got the reply to its own action
    state = env.state()
    assert state["step_count"] == len(ok) and state["total"] == sum(d for d, _ in ok)
    env.close()
    assert_no_leaks(before)


def test_close_from_another_thread_mid_call(server: ServerProcess) -> None:
    before = leaks.snapshot()
    env = Env(server.url, message_timeout=30)
    env.reset()
    closer = close_from_another_thread(env.close)
    with pytest.raises(SessionLost):
        env.step({"delta": 1, "sleep": 20})
    assert closer.finish() is False
    assert env.closed and not env.connected
    assert_no_leaks(before)


# -- capacity ----------------------------------------------------------------------------------


def test_capacity_refusal_while_many_sessions_connect_at_once(server: ServerProcess) -> None:
    before = leaks.snapshot()
    envs = [Env(server.url) for _ in range(12)]
    results = gather(*(env.connect for env in envs), stagger=0.0)
    connected = [r for r in results if isinstance(r, Env)]
    refused = [r for r in results if isinstance(r, CapacityReached)]
    assert (len(connected), len(refused)) == (server.max_sessions, 12 - server.max_sessions), results
    assert all(r.max_sessions == server.max_sessions for r in refused)
    for env in connected:
        assert (env.reset(start=1)).observation["count"] == 1
    for env in envs:
        env.close()
    with Env(server.url) as env:  # the server still serves
        assert (_reset_when_free(env, start=9)).observation["count"] == 9
    assert_no_leaks(before)


# -- Docker unreachable (no engine needed) ------------------------------------------------------


def test_docker_daemon_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    before = leaks.snapshot()
    with pytest.raises(DockerUnavailable) as info:
        Env.from_docker_image("openenv-test/echo:latest", ready_timeout=10)
    text = str(info.value)
    assert "/nonexistent.sock" in text and "DOCKER_HOST" in text
    assert_no_leaks(before)
