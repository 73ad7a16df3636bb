"""The server's sans-IO seams, without a socket: `EnvProtocol` with the HTTP routes (`_http`) and MCP RPC (`_rpc`).

One helper (`EnvProtocol.create_env`) handles a factory that raises for every
caller, each answering in its own shape; the session executor of
``openenv/session/create`` sessions comes in through the constructor.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import pytest

from openenv.server import Action, Environment, Observation, State, _http, tool
from openenv.server.asgi import create_app
from openenv.server.protocol import EnvProtocol, Session


class ThreadEnv(Environment[Action, Observation, State]):
    """A tool that says which thread runs it; counts the instances it closed."""

    closed = 0

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: Action) -> Observation:
        return Observation(reward=1.0)

    @property
    def state(self) -> State:
        return State()

    @tool
    def where(self) -> str:
        """The running thread's name."""
        return threading.current_thread().name

    def close(self) -> None:
        type(self).closed += 1


def broken() -> ThreadEnv:
    raise RuntimeError("no env for you")


def _rpc(protocol: EnvProtocol, method: str, **params: Any) -> dict[str, Any]:
    body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 7}).encode()
    reply = _http.mcp(protocol, body)
    assert reply.status == 200
    return json.loads(reply.body)  # type: ignore[no-any-return]


def _factory_failures(caplog: pytest.LogCaptureFixture) -> int:
    return sum("environment factory 'broken' failed" in r.getMessage() for r in caplog.records)


def test_a_raising_factory_gets_each_callers_answer_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    protocol = EnvProtocol(broken, max_sessions=1)
    caplog.set_level(logging.ERROR, logger="openenv.server")

    assert _http.reset(protocol, b"{}") == _http.INTERNAL_ERROR
    assert _http.step(protocol, b'{"action": {}}') == _http.INTERNAL_ERROR
    assert _rpc(protocol, "tools/list")["error"] == {
        "code": -32000,
        "message": "Failed to create environment",
        "data": {"factory_name": "broken"},
    }
    assert _rpc(protocol, "openenv/session/create")["error"] == {
        "code": -32000,
        "message": "Environment factory 'broken' failed to create instance.",
        "data": {"factory_name": "broken"},
    }
    assert protocol.active_sessions == 0  # the slot session/create reserved was given back
    session, frame = protocol.open_session()
    assert session is None and frame is not None and json.loads(frame)["data"]["code"] == "FACTORY_ERROR"
    assert protocol.active_sessions == 0
    assert _factory_failures(caplog) == 5  # once per failure, with its traceback
    assert all(r.exc_info for r in caplog.records if "environment factory" in r.getMessage())


def test_throw_away_instances_are_closed() -> None:
    protocol = EnvProtocol(ThreadEnv)
    before = ThreadEnv.closed
    assert _http.reset(protocol, b"").status == 200
    assert _http.step(protocol, b'{"action": {}}').status == 200
    assert _rpc(protocol, "tools/list")["result"]["tools"][0]["name"] == "where"
    assert ThreadEnv.closed == before + 3
    assert protocol.active_sessions == 0


def test_without_a_session_executor_session_calls_run_in_the_callers_thread() -> None:
    protocol = EnvProtocol(ThreadEnv)
    assert protocol.session_executor is None
    sid = _rpc(protocol, "openenv/session/create")["result"]["session_id"]
    session = protocol.lookup(sid)
    assert session is not None and session.executor is None
    result = _rpc(protocol, "tools/call", session_id=sid, name="where", arguments={})
    assert result["result"]["data"] == threading.current_thread().name
    assert _rpc(protocol, "openenv/session/close", session_id=sid)["result"] == {"session_id": sid, "closed": True}
    assert protocol.active_sessions == 0


def test_the_session_executor_comes_through_the_constructor() -> None:
    made: list[Session] = []

    def executor(session: Session) -> Executor:
        made.append(session)
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"test-session-{session.session_id[:8]}")

    protocol = EnvProtocol(ThreadEnv, max_sessions=2, session_executor=executor)
    sid = _rpc(protocol, "openenv/session/create")["result"]["session_id"]
    assert [s.session_id for s in made] == [sid]
    result = _rpc(protocol, "tools/call", session_id=sid, name="where", arguments={})
    assert result["result"]["data"].startswith(f"test-session-{sid[:8]}")
    session = protocol.lookup(sid)
    assert session is not None and session.executor is not None
    assert _rpc(protocol, "openenv/session/close", session_id=sid)["result"]["closed"] is True
    session.executor.shutdown(wait=True)  # close_ended shut it down without waiting: it has ended


def test_create_app_hands_its_executor_to_the_protocol() -> None:
    app = create_app(ThreadEnv)
    protocol: EnvProtocol = app.state.protocol
    assert protocol.session_executor is not None
    sid = _rpc(protocol, "openenv/session/create")["result"]["session_id"]
    result = _rpc(protocol, "tools/call", session_id=sid, name="where", arguments={})
    assert result["result"]["data"].startswith(f"openenv-session-{sid[:8]}")
    session = protocol.lookup(sid)
    assert session is not None and session.executor is not None
    _rpc(protocol, "openenv/session/close", session_id=sid)
    session.executor.shutdown(wait=True)


def test_close_while_attached_ends_the_session_when_its_websocket_detaches() -> None:
    protocol = EnvProtocol(ThreadEnv)
    sid = _rpc(protocol, "openenv/session/create")["result"]["session_id"]
    session, error = protocol.attach(sid)
    assert session is not None and error is None
    assert _rpc(protocol, "openenv/session/close", session_id=sid)["result"] == {
        "session_id": sid,
        "closed": False,
        "closing": True,
    }
    assert protocol.active_sessions == 1
    assert protocol.detach(session) is True  # the transport then ends it
    protocol.end_session(session)
    assert protocol.active_sessions == 0 and protocol.lookup(sid) is None


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("GET", "/health", 200, None),
        ("GET", "/nope", 404, None),
        ("POST", "/health", 405, "GET"),
        ("POST", "/reset", 501, None),
        ("DELETE", "/nope", 404, None),
        ("GET", "/step", 405, "POST"),
    ],
)
def test_the_embedded_servers_answers_without_a_body(method: str, path: str, status: int, allow: str | None) -> None:
    reply = _http.embedded(EnvProtocol(ThreadEnv), method, path)
    assert reply.status == status and dict(reply.headers).get("Allow") == allow
    if status == 501:
        assert (
            json.loads(reply.body)["detail"]
            == f"{method} {path} is not supported by this server; use the /ws WebSocket"
        )


@pytest.mark.parametrize(
    ("path", "too_large", "status", "allow"),
    [("/step", True, 413, None), ("/mcp", False, 501, None), ("/ws", False, 405, "GET"), ("/x", False, 404, None)],
)
def test_the_embedded_servers_answers_with_a_body(path: str, too_large: bool, status: int, allow: str | None) -> None:
    reply = _http.embedded_with_body("POST", path, too_large=too_large)
    assert reply.status == status and dict(reply.headers).get("Allow") == allow
    assert reply.content_type == "application/json" and "detail" in json.loads(reply.body)
