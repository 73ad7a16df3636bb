"""The ASGI app's HTTP surface (``openenv.server.asgi.create_app`` under uvicorn on 127.0.0.1)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from openenv.server.protocol import EnvProtocol
from openenv.server.tools_demo import ToolsDemoEnvironment

from .envs import IN_TIME, CounterEnv
from .helpers_sync import until


def _rpc(client: httpx.Client, method: str, params: dict[str, Any] | None = None, rid: int = 1) -> Any:
    body = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": rid}
    response = client.post("/mcp", json=body)
    assert response.status_code == 200
    return response.json()


def test_http_reset_and_step_are_stateless(asgi_server_factory: Any) -> None:
    server = asgi_server_factory(CounterEnv, max_sessions=1)
    with httpx.Client(base_url=server.url, trust_env=False) as client:
        assert client.get("/health").json() == {"status": "healthy"}
        reset = client.post("/reset", json={"seed": 7, "start": 2, "bogus": 1})
        assert reset.status_code == 200
        assert reset.json()["observation"]["count"] == 2 and reset.json()["metadata"] == {"reset": True}
        assert client.post("/reset").status_code == 200  # no body at all
        bad = client.post("/reset", json={"seed": -1})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "seed"]
        for _ in range(2):  # each /step runs on a fresh, never-reset instance
            step = client.post("/step", json={"action": {"delta": 1}})
            assert step.status_code == 200
            body = step.json()
            assert (body["observation"]["count"], body["reward"], body["done"]) == (1, 1.0, False)
            assert body["metadata"] == body["observation"]["metadata"] == {"step": 1}
        zero = client.post("/step", json={"action": {"delta": 0}}).json()
        assert zero["metadata"] is None and zero["reward"] == 0.0  # HTTP flavour: null metadata, float reward
        missing = client.post("/step", json={"delta": 1})
        assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "action"]
        invalid = client.post("/step", json={"action": {"delta": 1000}})
        assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"] == ["delta"]
        raised = client.post("/step", json={"action": {"delta": 99}})
        assert (raised.status_code, raised.text) == (500, "Internal Server Error")
        assert client.get("/state").json()["step_count"] == 0
        assert client.get("/reset").status_code == 405
        assert client.get("/nope").json() == {"detail": "Not Found"}
        assert client.get("/ws").status_code == 404
    assert server.active_sessions == 0  # HTTP calls never take a slot


def test_post_mcp_sessions_capacity_and_attach(asgi_server_factory: Any) -> None:
    server = asgi_server_factory(ToolsDemoEnvironment, max_sessions=1)
    ws_url = server.url.replace("http", "ws", 1) + "/ws"
    with httpx.Client(base_url=server.url, trust_env=False) as client:
        assert client.post("/mcp", content=b"{not json").json()["error"]["code"] == -32700
        stateless = _rpc(client, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert stateless["result"]["data"] == 3
        sid = _rpc(client, "openenv/session/create")["result"]["session_id"]
        full = _rpc(client, "openenv/session/create")
        assert full["error"]["code"] == -32000 and full["error"]["data"] == {"active_sessions": 1, "max_sessions": 1}
        assert _rpc(client, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}, "session_id": sid})
        assert _rpc(client, "tools/list", {"session_id": "nope"})["error"]["code"] == -32602
        with connect(f"{ws_url}?session_id={sid}") as ws:
            ws.send(json.dumps({"type": "state"}))
            assert json.loads(ws.recv())["data"]["tool_calls"] == 1  # the HTTP call ran on this session
            closing = _rpc(client, "openenv/session/close", {"session_id": sid})["result"]
            assert closing == {"session_id": sid, "closed": False, "closing": True}
        with connect(f"{ws_url}?session_id=unknown") as ws:
            error = json.loads(ws.recv())
            assert error["data"]["code"] == "SESSION_ERROR" and "Unknown session_id" in error["data"]["message"]
    for _ in range(500):  # the detach (and so the deferred close) happens when the server sees the disconnect
        if server.active_sessions == 0:
            break
        time.sleep(0.01)
    assert server.active_sessions == 0 and server.protocol.lookup(sid) is None


def test_protocol_refuses_bad_arguments() -> None:
    with pytest.raises(TypeError):
        EnvProtocol(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EnvProtocol(CounterEnv, max_sessions=0)


def test_idle_ws_clients_are_closed_and_busy_ones_are_not(asgi_server_factory: Any) -> None:
    """One idle timer per connection (not a ``wait_for`` per frame): silent clients get 1001, slow steps do not."""
    from websockets.exceptions import ConnectionClosed

    server = asgi_server_factory(CounterEnv, max_sessions=2, idle_timeout=IN_TIME)
    with connect(server.ws_url) as busy, connect(server.ws_url) as silent:
        for conn in (busy, silent):
            conn.send(json.dumps({"type": "reset"}))
            assert json.loads(conn.recv(timeout=10))["type"] == "observation"
        # a step longer than idle_timeout is not idleness; the clock restarts after its reply, so the
        # next frame is served (sent with the step: a loaded client replying late cannot expire it)
        busy.send(json.dumps({"type": "step", "data": {"delta": 1, "sleep": IN_TIME + 1.0}}))
        busy.send(json.dumps({"type": "state"}))
        assert json.loads(busy.recv(timeout=10))["type"] == "observation"
        assert json.loads(busy.recv(timeout=10))["type"] == "state"
        for conn in (silent, busy):
            with pytest.raises(ConnectionClosed) as info:
                conn.recv(timeout=10)
            assert info.value.rcvd is not None and info.value.rcvd.code == 1001
            assert "idle timeout" in info.value.rcvd.reason
    deadline = time.monotonic() + 10
    while server.active_sessions and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.active_sessions == 0


def test_ws_is_served_at_ws_only_and_under_a_root_path(asgi_server_factory: Any) -> None:
    """``/ws`` bypasses Starlette's routing: other WebSocket paths are still refused, and a root path is honoured."""
    from websockets.exceptions import InvalidStatus

    from openenv.server.asgi import _route_path

    server = asgi_server_factory(CounterEnv, max_sessions=1)
    with pytest.raises(InvalidStatus) as info:
        connect(server.url.replace("http", "ws", 1) + "/wsx", open_timeout=10).close()
    assert info.value.response.status_code == 403  # Starlette's answer to an unrouted WebSocket
    with connect(server.url.replace("http", "ws", 1) + "/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
    assert server.active_sessions == 0 or _wait_for_no_sessions(server)
    # the path the routes see (Starlette's rule): the scope's path without its root_path
    assert _route_path({"path": "/ws"}) == "/ws"
    assert _route_path({"path": "/env/ws", "root_path": "/env"}) == "/ws"
    assert _route_path({"path": "/ws", "root_path": "/env"}) == "/ws"  # root path not in the path
    assert _route_path({"path": "/envws", "root_path": "/env"}) == "/envws"


def _wait_for_no_sessions(server: Any) -> bool:
    deadline = time.monotonic() + 10
    while server.active_sessions and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(server.active_sessions == 0)


def test_ws_frames_sent_ahead_of_their_replies_are_all_answered_in_order(asgi_server_factory: Any) -> None:
    """``uvicorn_config()``'s WebSocket protocol reads up to two messages ahead (uvicorn: one) and then pauses
    the socket: a client that floods frames gets every reply, in order, and the connection stays usable."""
    from openenv.server.asgi import uvicorn_config

    protocol = uvicorn_config(object()).ws
    assert getattr(protocol, "__name__", protocol) == "ReadAheadWebSockets"  # what the fixture's server runs
    server = asgi_server_factory(CounterEnv, max_sessions=1)
    with connect(server.ws_url, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "reset"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        flood = 300  # sent at once, more than read-ahead + the socket buffers hold before the server pauses
        for _ in range(flood):
            ws.send(json.dumps({"type": "step", "data": {"delta": 1, "sleep": 0.001}}))
        counts = [json.loads(ws.recv(timeout=30))["data"]["observation"]["count"] for _ in range(flood)]
        assert counts == list(range(1, flood + 1))
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=10))["data"]["step_count"] == flood


def test_a_blocking_session_runs_on_one_thread_of_its_own_that_ends_with_it(asgi_server_factory: Any) -> None:
    """The ASGI app's blocking ``/ws`` sessions: every call on the session's own thread, in order, one hop each;
    a blocked step stalls only its session; the thread ends when the session does."""
    import threading

    from .test_server_transports import BlockingEnv

    def step(ws: Any, message: str) -> Any:
        ws.send(json.dumps({"type": "step", "data": {"message": message}}))
        return json.loads(ws.recv(timeout=30))["data"]["observation"]

    BlockingEnv.released.clear()
    BlockingEnv.entered.clear()
    server = asgi_server_factory(BlockingEnv, max_sessions=2)
    with connect(server.ws_url, open_timeout=10) as slow, connect(server.ws_url, open_timeout=10) as fast:
        slow.send(json.dumps({"type": "reset"}))
        first = json.loads(slow.recv(timeout=30))["data"]["observation"]["thread"]
        assert first.startswith("openenv-session-")
        slow.send(json.dumps({"type": "step", "data": {"message": "block"}}))
        assert BlockingEnv.entered.wait(30)
        threads = {step(fast, str(n))["thread"] for n in range(5)}  # answered while `slow` is blocked
        assert len(threads) == 1 and first not in threads
        BlockingEnv.released.set()
        blocked = json.loads(slow.recv(timeout=30))["data"]["observation"]
        assert (blocked["thread"], blocked["message"]) == (first, "block")
        assert step(slow, "after")["thread"] == first
        assert first in {t.name for t in threading.enumerate()}
    assert _wait_for_no_sessions(server)
    deadline = time.monotonic() + 10
    while first in {t.name for t in threading.enumerate()} and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first not in {t.name for t in threading.enumerate()}  # ended with its session


@pytest.mark.parametrize("mixed", [False, True], ids=["blocking", "async-step"])
def test_a_blocking_env_is_made_used_and_closed_on_its_sessions_thread(asgi_server_factory: Any, mixed: bool) -> None:
    """The factory runs on the thread that runs the session's plain methods (an environment bound to the thread
    that made it works), for a blocking environment and for the plain methods beside an ``async def step``."""
    from .test_server_transports import MadeEnv, MadeMixedEnv, made_and_ran

    MadeEnv.closed.clear()
    server = asgi_server_factory(MadeMixedEnv if mixed else MadeEnv, max_sessions=2)
    with connect(server.ws_url, open_timeout=10) as ws, connect(server.ws_url, open_timeout=10) as other:
        made, ran = made_and_ran(ws, {"type": "reset"})
        assert ran == made
        made_step, ran_step = made_and_ran(ws, {"type": "step", "data": {"message": "x"}})
        assert made_step == made
        assert (ran_step == made) is not mixed  # an async step runs on the loop
        made_other, ran_other = made_and_ran(other, {"type": "reset"})
        assert made_other != made and ran_other == made_other  # a thread per session
    assert _wait_for_no_sessions(server)
    expected = sorted((int(t), int(t)) for t in (made, made_other))  # each closed on the thread that made it
    until(lambda: sorted(MadeEnv.closed) == expected)
