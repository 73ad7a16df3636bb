"""Tests of ``openenv.server`` alone: raw WebSocket frames and plain HTTP against EnvServer."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import Field
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

import openenv.sync
from openenv import _cli as cli
from openenv._cli import serve as cli_serve
from openenv.server import Action, Environment, EnvServer, Observation, State
from openenv.server.echo import EchoAction, EchoEnvironment, EchoObservation, EchoState
from openenv.server.environment import filter_kwargs
from openenv.server.tools import tools_of

# --------------------------------------------------------------------------- environments


class CounterAction(Action):
    delta: int = Field(default=0, le=100)
    int_reward: bool = False
    wait: bool = False


class CounterObservation(Observation):
    count: int = 0
    note: str = ""


class CounterState(State):
    total: int = 0


class CounterEnv(Environment[CounterAction, CounterObservation, CounterState]):
    """The counter of the wire transcripts (float rewards unless ``int_reward``; records resets; ``close``).

    Not ``tests/envs.py``'s: the byte-exact transcript tests need its exact frames.
    ``delta == 99`` raises; ``start == -99`` fails ``reset``; ``wait`` blocks on ``GATE``.
    """

    action_type = CounterAction
    observation_type = CounterObservation
    state_type = CounterState

    GATE = threading.Event()

    def __init__(self) -> None:
        self._state = CounterState()
        self.count = 0
        self.closed = False
        self.reset_calls: list[dict[str, Any]] = []

    def reset(self, seed: int | None = None, episode_id: str | None = None, start: int = 0) -> CounterObservation:
        self.reset_calls.append({"seed": seed, "episode_id": episode_id, "start": start})
        if start == -99:
            raise ValueError("cannot start at -99")
        self._state = CounterState(episode_id=episode_id, step_count=0, total=start)
        self.count = start
        return CounterObservation(count=start, note=f"seed={seed}", metadata={"reset": True})

    def step(self, action: CounterAction) -> CounterObservation:
        if action.delta == 99:
            raise RuntimeError("boom: delta 99 is cursed")
        if action.wait:
            assert self.GATE.wait(30)
        self.count += action.delta
        self._state.step_count += 1
        self._state.total = self.count
        meta = {"step": self._state.step_count} if action.delta else {}
        reward: float = action.delta if action.int_reward else float(action.delta)
        return CounterObservation(count=self.count, reward=reward, done=self.count >= 10, metadata=meta)

    @property
    def state(self) -> CounterState:
        return self._state

    def close(self) -> None:
        self.closed = True


class KwargsEnv(Environment[Action, Observation, State]):
    """reset takes ``**kwargs``: every key reaches it."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self.seen = {"seed": seed, "episode_id": episode_id, **kwargs}
        return Observation(metadata={"seen": self.seen})

    def step(self, action: Action) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        raise RuntimeError("no state today")


class Recorder:
    """A factory that records the environments it creates."""

    def __init__(self, cls: type[Environment[Any, Any, Any]] = CounterEnv) -> None:
        self.cls = cls
        self.envs: list[Any] = []
        self.__name__ = "Recorder"

    def __call__(self) -> Any:
        env = self.cls()
        self.envs.append(env)
        return env


def broken_factory() -> CounterEnv:
    raise RuntimeError("no env for you")


class LonelyEnv(CounterEnv):
    SUPPORTS_CONCURRENT_SESSIONS = False


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def counter() -> Iterator[EnvServer]:
    with EnvServer(CounterEnv, max_sessions=4) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _open_gate() -> Iterator[None]:
    CounterEnv.GATE.clear()
    yield
    CounterEnv.GATE.set()


@pytest.fixture(autouse=True)
def _no_handler_failures(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """websockets logs an error when a connection handler raises: that is a server bug."""
    caplog.set_level(logging.DEBUG, logger="openenv.server")
    yield
    failures = [r for r in caplog.records if r.name.startswith("websockets") and r.levelno >= 40]
    assert not failures, [r.getMessage() for r in failures]


def ws(srv: EnvServer, path: str = "/ws", **kwargs: Any) -> ClientConnection:
    conn: ClientConnection = connect(srv.url.replace("http", "ws", 1) + path, open_timeout=5, **kwargs)
    return conn


def ask(conn: ClientConnection, frame: Any) -> dict[str, Any]:
    conn.send(frame if isinstance(frame, str) else json.dumps(frame))
    reply = json.loads(conn.recv(timeout=10))
    assert isinstance(reply, dict)
    return reply


def ask_raw(conn: ClientConnection, frame: str) -> str:
    conn.send(frame)
    reply = conn.recv(timeout=10)
    assert isinstance(reply, str)
    return reply


def closed_code(conn: ClientConnection) -> int:
    """Wait for the server to close ``conn``; return the close code it sent."""
    with pytest.raises(ConnectionClosed) as info:
        conn.recv(timeout=10)
    assert info.value.rcvd is not None
    return info.value.rcvd.code


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def error(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["type"] == "error", reply
    data = reply["data"]
    assert isinstance(data, dict)
    return data


# --------------------------------------------------------------------------- HTTP


def test_health(counter: EnvServer) -> None:
    r = httpx.get(counter.url + "/health")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"status": "healthy"}


def test_metadata_defaults_to_class_name(counter: EnvServer) -> None:
    r = httpx.get(counter.url + "/metadata")
    assert r.status_code == 200
    assert r.json() == {
        "name": "CounterEnv",
        "description": "CounterEnv environment",
        "readme_content": None,
        "version": openenv.sync.__version__,
        "author": None,
        "documentation_url": None,
    }


def test_metadata_reports_the_environment_version() -> None:
    class Versioned(CounterEnv):
        version = "2.3.1"

    with EnvServer(Versioned) as srv:
        assert httpx.get(srv.url + "/metadata").json()["version"] == "2.3.1"


def test_metadata_name_override_and_callable_factory() -> None:
    with EnvServer(Recorder(), name="counter_env") as srv:
        assert httpx.get(srv.url + "/metadata").json()["name"] == "counter_env"
    rec = Recorder()
    with EnvServer(rec) as srv:
        meta = httpx.get(srv.url + "/metadata").json()
        assert meta["name"] == "CounterEnv"
        assert meta["description"] == "CounterEnv environment"
        assert srv.name == "CounterEnv"
    assert rec.envs and all(env.closed for env in rec.envs)


def test_schema(counter: EnvServer) -> None:
    body = httpx.get(counter.url + "/schema").json()
    assert set(body) == {"action", "observation", "state", "reset_observation"}
    assert body["action"] == CounterAction.model_json_schema()
    assert body["observation"] == CounterObservation.model_json_schema()
    assert body["reset_observation"] == CounterObservation.model_json_schema()
    assert body["state"] == CounterState.model_json_schema()
    assert "total" in body["state"]["properties"]


def test_schema_of_echo() -> None:
    with EnvServer(EchoEnvironment) as srv:
        body = httpx.get(srv.url + "/schema").json()
    assert body["action"] == EchoAction.model_json_schema()
    assert body["observation"] == EchoObservation.model_json_schema()
    assert body["state"] == EchoState.model_json_schema()


def test_http_state_is_a_fresh_instance(counter: EnvServer) -> None:
    with ws(counter) as conn:
        ask(conn, {"type": "reset", "data": {"start": 5}})
        ask(conn, {"type": "step", "data": {"delta": 1}})
        r = httpx.get(counter.url + "/state")
    assert r.status_code == 200
    assert r.json() == {"episode_id": None, "step_count": 0, "total": 0}
    assert counter.active_sessions <= 1  # HTTP calls take no slot


def test_http_state_keeps_only_declared_fields() -> None:
    class Extra(State):
        hidden: int = 7

    class Undeclared(CounterEnv):
        state_type = State  # type: ignore[assignment]

        @property
        def state(self) -> CounterState:
            return CounterState(total=3)

    with EnvServer(Undeclared) as srv:
        assert httpx.get(srv.url + "/state").json() == {"episode_id": None, "step_count": 0}
        with ws(srv) as conn:  # /ws sends the full model
            assert ask(conn, {"type": "state"})["data"] == {
                "episode_id": None,
                "step_count": 0,
                "total": 3,
            }
    assert Extra().hidden == 7


def test_http_state_factory_failure_is_500() -> None:
    with EnvServer(broken_factory) as srv:
        r = httpx.get(srv.url + "/state")
    assert r.status_code == 500
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text == "Internal Server Error"


@pytest.mark.parametrize("path", ["/", "/nope", "/ws", "/ws/", "/health/x"])
def test_unknown_paths_and_plain_get_ws_are_404(counter: EnvServer, path: str) -> None:
    r = httpx.get(counter.url + path)
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"detail": "Not Found"}


def test_wrong_methods(counter: EnvServer) -> None:
    r = httpx.post(counter.url + "/health")
    assert r.status_code == 405
    assert r.json() == {"detail": "Method Not Allowed"}
    assert r.headers["allow"] == "GET"
    r = httpx.get(counter.url + "/reset")
    assert r.status_code == 405
    # A body-less POST /reset reaches the server, which does not implement it.
    r = httpx.post(counter.url + "/reset")
    assert r.status_code == 501
    assert "/ws" in r.json()["detail"]
    # Requests with a body are answered, never dropped.
    r = httpx.post(counter.url + "/step", json={"action": {"delta": 1}})
    assert r.status_code == 501
    assert "/ws" in r.json()["detail"]
    r = httpx.post(counter.url + "/health", content=b"x" * 100)
    assert r.status_code == 405
    assert r.headers["allow"] == "GET"
    r = httpx.post(counter.url + "/nope", json={})
    assert r.status_code == 404
    # the server still serves sessions
    with ws(counter) as conn:
        assert ask(conn, {"type": "reset"})["type"] == "observation"


@pytest.mark.parametrize("path", ["/ws/ws", "/ws/", "/WS", "/mcp", "/"])
def test_upgrade_to_other_paths_is_403(counter: EnvServer, path: str) -> None:
    with pytest.raises(InvalidStatus) as info:
        with ws(counter, path):
            pass
    assert info.value.response.status_code == 403


def test_query_string_on_ws_is_ignored(counter: EnvServer) -> None:
    with ws(counter, "/ws?session_id=abc&x=1") as conn:
        assert ask(conn, {"type": "state"})["type"] == "state"


# --------------------------------------------------------------------------- /ws transcript


def test_appendix_a_transcript(counter: EnvServer) -> None:
    """The ``/ws`` transcript observed from an OpenEnv 0.10 server, frame for frame (byte-exact where it matters)."""
    with ws(counter) as conn:
        assert (
            ask_raw(conn, '{"type":"state"}') == '{"type":"state","data":{"episode_id":null,"step_count":0,"total":0}}'
        )
        assert ask_raw(conn, '{"type":"reset"}') == (
            '{"type":"observation","data":{"observation":{"metadata":{"reset":true},"count":0,'
            '"note":"seed=None"},"reward":null,"done":false,"metadata":{"reset":true}}}'
        )
        reset = '{"type":"reset","data":{"seed":3,"episode_id":"wsep","start":1,"unknown_kw":5}}'
        assert ask_raw(conn, reset) == (
            '{"type":"observation","data":{"observation":{"metadata":{"reset":true},"count":1,'
            '"note":"seed=3"},"reward":null,"done":false,"metadata":{"reset":true}}}'
        )
        assert ask_raw(conn, '{"type":"step","data":{"delta":1}}') == (
            '{"type":"observation","data":{"observation":{"metadata":{"step":1},"count":2,'
            '"note":""},"reward":1.0,"done":false,"metadata":{"step":1}}}'
        )
        # Empty metadata: no top-level key.
        assert ask_raw(conn, '{"type":"step","data":{"delta":0}}') == (
            '{"type":"observation","data":{"observation":{"metadata":{},"count":2,"note":""},'
            '"reward":0.0,"done":false}}'
        )
        assert error(ask(conn, '{"type":"step"}')) == {
            "message": "Invalid message",
            "code": "VALIDATION_ERROR",
            "errors": [
                {
                    "type": "missing",
                    "loc": ["data"],
                    "msg": "Field required",
                    "input": {"type": "step"},
                }
            ],
        }
        data = error(ask(conn, '{"type":"step","data":{"delta":1},"id":7}'))
        assert data["code"] == "VALIDATION_ERROR"
        assert data["message"] == "Invalid message"
        assert [(e["type"], e["loc"]) for e in data["errors"]] == [("extra_forbidden", ["id"])]
        assert ask_raw(conn, '{"type":"bogus"}') == (
            '{"type":"error","data":{"message":"Unknown message type: bogus","code":"UNKNOWN_TYPE"}}'
        )
        assert ask_raw(conn, "{not json") == (
            '{"type":"error","data":{"message":"Invalid JSON: Expecting property name enclosed in '
            'double quotes: line 1 column 2 (char 1)","code":"INVALID_JSON"}}'
        )
        mcp = '{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/list","id":5}}'
        assert ask_raw(conn, mcp) == (
            '{"type":"mcp","data":{"jsonrpc":"2.0","id":5,"error":{"code":-32603,'
            '"message":"Environment does not support MCP","data":null}}}'
        )
        assert ask(conn, {"type": "state"}) == {
            "type": "state",
            "data": {"episode_id": "wsep", "step_count": 2, "total": 2},
        }
        conn.send('{"type":"close"}')
        assert closed_code(conn) == 1000  # and no reply frame before the close
    wait_for(lambda: counter.active_sessions == 0, "the session to be destroyed")


def test_echo_episode() -> None:
    with EnvServer(EchoEnvironment) as srv, ws(srv) as conn:
        reply = ask(conn, {"type": "reset", "data": {"episode_id": "e1", "bogus": 1}})
        assert reply == {
            "type": "observation",
            "data": {
                "observation": {
                    "metadata": {},
                    "echoed_message": "Echo environment ready!",
                    "message_length": 0,
                },
                "reward": 0.0,
                "done": False,
            },
        }
        reply = ask(conn, {"type": "step", "data": {"message": "hello"}})
        assert reply["data"] == {
            "observation": {
                "metadata": {"step": 1},
                "echoed_message": "hello",
                "message_length": 5,
            },
            "reward": 0.5,
            "done": False,
            "metadata": {"step": 1},
        }
        assert ask(conn, {"type": "state"})["data"] == {"episode_id": "e1", "step_count": 1}
        ask(conn, {"type": "reset"})
        episode_id = ask(conn, {"type": "state"})["data"]["episode_id"]
        assert isinstance(episode_id, str) and len(episode_id) == 36


def test_int_reward_done_and_unicode(counter: EnvServer) -> None:
    with ws(counter) as conn:
        ask(conn, {"type": "reset"})
        raw = ask_raw(conn, '{"type":"step","data":{"delta":10,"int_reward":true}}')
        assert '"reward":10,"done":true' in raw  # an int reward keeps its type on /ws
        reply = ask(conn, {"type": "reset", "data": {"episode_id": "épisode ☃"}})
        assert reply["type"] == "observation"
        assert ask(conn, {"type": "state"})["data"]["episode_id"] == "épisode ☃"


def test_pipelined_requests_are_answered_in_order(counter: EnvServer) -> None:
    with ws(counter) as conn:
        conn.send('{"type":"reset"}')
        for delta in (1, 2, 3):
            conn.send(json.dumps({"type": "step", "data": {"delta": delta}}))
        conn.send('{"type":"bogus"}')
        conn.send('{"type":"state"}')
        replies = [json.loads(conn.recv(timeout=10)) for _ in range(6)]
    assert [r["type"] for r in replies] == ["observation"] * 4 + ["error", "state"]
    assert [r["data"]["observation"]["count"] for r in replies[1:4]] == [1, 3, 6]
    assert replies[5]["data"]["step_count"] == 3


# --------------------------------------------------------------------------- error codes


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ("", "Invalid JSON: Expecting value: line 1 column 1 (char 0)"),
        ('{"type":"reset"', "Invalid JSON: Expecting ',' delimiter: line 1 column 16 (char 15)"),
        ("nope", "Invalid JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_invalid_json(counter: EnvServer, frame: str, message: str) -> None:
    with ws(counter) as conn:
        assert error(ask(conn, frame)) == {"message": message, "code": "INVALID_JSON"}
        assert ask(conn, {"type": "state"})["type"] == "state"  # the session continues


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"type": "bogus"}, "Unknown message type: bogus"),
        ({"data": {}}, "Unknown message type: "),
        ({"type": None}, "Unknown message type: None"),
        ({"type": "STEP", "data": {}}, "Unknown message type: STEP"),
        ({"type": "bogus", "id": 1}, "Unknown message type: bogus"),  # type is checked first
    ],
)
def test_unknown_type(counter: EnvServer, frame: dict[str, Any], message: str) -> None:
    with ws(counter) as conn:
        assert error(ask(conn, frame)) == {"message": message, "code": "UNKNOWN_TYPE"}
        assert ask(conn, {"type": "state"})["type"] == "state"


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ({"type": "step"}, [("missing", ["data"])]),
        ({"type": "step", "data": None}, [("dict_type", ["data"])]),
        ({"type": "step", "data": [1]}, [("dict_type", ["data"])]),
        ({"type": "step", "data": {}, "id": 1}, [("extra_forbidden", ["id"])]),
        ({"type": "reset", "data": None}, [("dict_type", ["data"])]),
        ({"type": "reset", "extra": 1}, [("extra_forbidden", ["extra"])]),
        ({"type": "state", "data": {}}, [("extra_forbidden", ["data"])]),
        ({"type": "state", "data": None}, [("extra_forbidden", ["data"])]),
        ({"type": "close", "data": {}}, [("extra_forbidden", ["data"])]),
        ({"type": "mcp"}, [("missing", ["data"])]),
        ({"type": "mcp", "data": "x"}, [("dict_type", ["data"])]),
    ],
)
def test_envelope_validation(counter: EnvServer, frame: dict[str, Any], expected: list[tuple[str, list[Any]]]) -> None:
    with ws(counter) as conn:
        data = error(ask(conn, frame))
        assert data["code"] == "VALIDATION_ERROR"
        assert data["message"] == "Invalid message"
        assert [(e["type"], e["loc"]) for e in data["errors"]] == expected
        assert all("msg" in e and "input" in e and "url" not in e for e in data["errors"])
        # The session continues (an invalid close does not close it either).
        assert ask(conn, {"type": "state"})["type"] == "state"


def test_non_object_frame_is_a_validation_error(counter: EnvServer) -> None:
    with ws(counter) as conn:
        data = error(ask(conn, "[1, 2]"))
        assert data["code"] == "VALIDATION_ERROR"
        assert data["errors"][0]["type"] == "dict_type"
        assert ask(conn, {"type": "state"})["type"] == "state"


def test_action_validation(counter: EnvServer) -> None:
    with ws(counter) as conn:
        ask(conn, {"type": "reset"})
        data = error(ask(conn, {"type": "step", "data": {"delta": 1000, "extra": 1}}))
        assert data["code"] == "VALIDATION_ERROR"
        assert data["message"] == "Invalid message"
        assert data["errors"] == [
            {
                "type": "less_than_equal",
                "loc": ["delta"],
                "msg": "Input should be less than or equal to 100",
                "input": 1000,
                "ctx": {"le": 100},
            },
            {
                "type": "extra_forbidden",
                "loc": ["extra"],
                "msg": "Extra inputs are not permitted",
                "input": 1,
            },
        ]
        data = error(ask(conn, {"type": "step", "data": {"delta": "x"}}))
        assert data["errors"][0]["type"] == "int_parsing"
        assert ask(conn, {"type": "state"})["data"]["step_count"] == 0


def test_validation_errors_are_json_safe() -> None:
    class Picky(Action):
        value: int = 0

        def model_post_init(self, context: Any) -> None:
            if self.value < 0:
                raise ValueError("negative")

    class PickyEnv(CounterEnv):
        action_type = Picky  # type: ignore[assignment]

    with EnvServer(PickyEnv) as srv, ws(srv) as conn:
        data = error(ask(conn, {"type": "step", "data": {"value": -1}}))
    assert data["code"] == "VALIDATION_ERROR"
    assert data["errors"][0]["type"] == "value_error"
    assert isinstance(data["errors"][0]["ctx"]["error"], str)


def test_execution_errors_keep_the_session(counter: EnvServer) -> None:
    with ws(counter) as conn:
        ask(conn, {"type": "reset"})
        ask(conn, {"type": "step", "data": {"delta": 2}})
        assert error(ask(conn, {"type": "step", "data": {"delta": 99}})) == {
            "message": "boom: delta 99 is cursed",
            "code": "EXECUTION_ERROR",
        }
        assert error(ask(conn, {"type": "reset", "data": {"start": -99}})) == {
            "message": "cannot start at -99",
            "code": "EXECUTION_ERROR",
        }
        # State as the environment left it.
        assert ask(conn, {"type": "state"})["data"] == {
            "episode_id": None,
            "step_count": 1,
            "total": 2,
        }


def test_state_property_raising_is_an_execution_error() -> None:
    with EnvServer(KwargsEnv) as srv, ws(srv) as conn:
        assert error(ask(conn, {"type": "state"})) == {
            "message": "no state today",
            "code": "EXECUTION_ERROR",
        }
        assert ask(conn, {"type": "reset"})["type"] == "observation"


def test_factory_error() -> None:
    with EnvServer(broken_factory, max_sessions=1) as srv:
        with ws(srv) as conn:
            assert error(json.loads(conn.recv(timeout=10))) == {
                "message": "Environment factory 'broken_factory' failed to create instance.",
                "code": "FACTORY_ERROR",
                "factory_name": "broken_factory",
            }
            assert closed_code(conn) == 1000
        wait_for(lambda: srv.active_sessions == 0, "the slot to be freed")
        with ws(srv) as conn:  # the slot was released: same error, not capacity
            assert error(json.loads(conn.recv(timeout=10)))["code"] == "FACTORY_ERROR"


def test_binary_frame_is_a_session_error() -> None:
    rec = Recorder()
    with EnvServer(rec) as srv, ws(srv) as conn:
        ask(conn, {"type": "reset"})
        conn.send(b'{"type":"state"}')
        assert error(json.loads(conn.recv(timeout=10))) == {
            "message": "'text'",
            "code": "SESSION_ERROR",
        }
        assert closed_code(conn) == 1000
        wait_for(lambda: srv.active_sessions == 0, "the session to be destroyed")
    assert rec.envs[0].closed


def test_mcp_without_id(counter: EnvServer) -> None:
    with ws(counter) as conn:
        reply = ask(conn, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list"}})
    assert reply == {
        "type": "mcp",
        "data": {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32603, "message": "Environment does not support MCP", "data": None},
        },
    }


# --------------------------------------------------------------------------- capacity


def test_capacity_refusal_and_slot_release() -> None:
    rec = Recorder()
    with EnvServer(rec, max_sessions=1) as srv:
        with ws(srv) as first:
            ask(first, {"type": "reset"})
            assert srv.active_sessions == 1
            with pytest.raises(InvalidStatus) as refused:  # refused before the handshake completes
                with ws(srv):
                    pass
            response = refused.value.response
            assert response.status_code == 503
            assert response.headers["Content-Type"] == "application/json"
            assert error(json.loads(response.body)) == {
                "message": "Server at capacity: 1/1 sessions active. Cannot accept new connections.",
                "code": "CAPACITY_REACHED",
                "active_sessions": 1,
                "max_sessions": 1,
            }
            assert len(rec.envs) == 1  # the factory was not called for the refused session
            assert ask(first, {"type": "step", "data": {"delta": 1}})["type"] == "observation"
        wait_for(lambda: srv.active_sessions == 0, "the slot to be freed")
        assert rec.envs[0].closed
        with ws(srv) as third:
            assert ask(third, {"type": "state"})["data"]["step_count"] == 0  # a fresh env
        wait_for(lambda: srv.active_sessions == 0, "the slot to be freed")
    assert len(rec.envs) == 2 and all(env.closed for env in rec.envs)


def test_capacity_counts_up_to_max() -> None:
    with EnvServer(CounterEnv, max_sessions=3) as srv:
        with ws(srv) as a, ws(srv) as b, ws(srv) as c:
            for conn in (a, b, c):
                ask(conn, {"type": "reset"})
            assert srv.active_sessions == 3
            with pytest.raises(InvalidStatus) as refused:
                with ws(srv):
                    pass
            data = error(json.loads(refused.value.response.body))
            assert data["code"] == "CAPACITY_REACHED"
            assert (data["active_sessions"], data["max_sessions"]) == (3, 3)
            assert data["message"].startswith("Server at capacity: 3/3 sessions active.")


def test_close_frame_frees_the_slot_and_closes_the_env() -> None:
    rec = Recorder()
    with EnvServer(rec, max_sessions=1) as srv:
        with ws(srv) as conn:
            ask(conn, {"type": "reset"})
            conn.send('{"type":"close"}')
            assert closed_code(conn) == 1000
        wait_for(lambda: srv.active_sessions == 0, "the slot to be freed")
        assert rec.envs[0].closed


def test_refuses_concurrency_for_single_session_envs() -> None:
    with pytest.raises(ValueError, match="SUPPORTS_CONCURRENT_SESSIONS"):
        EnvServer(LonelyEnv, max_sessions=2)
    EnvServer(LonelyEnv, max_sessions=1)  # fine
    with pytest.raises(ValueError):
        EnvServer(CounterEnv, max_sessions=0)


def test_slow_step_blocks_only_its_own_session(counter: EnvServer) -> None:
    with ws(counter) as slow, ws(counter) as fast:
        ask(slow, {"type": "reset"})
        slow.send(json.dumps({"type": "step", "data": {"delta": 1, "wait": True}}))
        # The other session answers while the first step is still blocked.
        assert ask(fast, {"type": "reset"})["type"] == "observation"
        assert ask(fast, {"type": "step", "data": {"delta": 2}})["data"]["observation"]["count"] == 2
        CounterEnv.GATE.set()
        assert json.loads(slow.recv(timeout=10))["data"]["observation"]["count"] == 1


# --------------------------------------------------------------------------- limits, shutdown


def test_oversized_message_closes_1009() -> None:
    with EnvServer(EchoEnvironment, max_message_size=1024) as srv, ws(srv) as conn:
        ask(conn, {"type": "reset"})
        conn.send(json.dumps({"type": "step", "data": {"message": "x" * 2000}}))
        assert closed_code(conn) == 1009
        wait_for(lambda: srv.active_sessions == 0, "the session to be destroyed")


def test_default_limit_accepts_large_messages() -> None:
    """Above websockets' 1 MiB default, below the server's 16 MiB."""
    message = "y" * (3 * 1024 * 1024)
    with EnvServer(EchoEnvironment) as srv, ws(srv, max_size=None) as conn:
        ask(conn, {"type": "reset"})
        reply = ask(conn, {"type": "step", "data": {"message": message}})
        assert reply["data"]["observation"]["message_length"] == len(message)


def test_stop_drops_open_sessions_and_is_idempotent() -> None:
    rec = Recorder()
    srv = EnvServer(rec, max_sessions=2).start()
    port = srv.port
    try:
        assert srv.running and port > 0
        with ws(srv) as conn:
            ask(conn, {"type": "reset"})
            srv.stop()
            assert closed_code(conn) == 1012
        assert not srv.running
        assert srv.active_sessions == 0
        assert rec.envs[0].closed
        srv.stop()  # idempotent
        with pytest.raises(httpx.ConnectError):
            httpx.get(srv.url + "/health")
        # start() again serves on the same port (a "restarted" server).
        srv.start()
        assert srv.port == port
        assert httpx.get(srv.url + "/health").json() == {"status": "healthy"}
        with ws(srv) as conn:
            assert ask(conn, {"type": "state"})["data"]["step_count"] == 0
    finally:
        srv.stop()


def test_context_manager_and_properties() -> None:
    srv = EnvServer(CounterEnv, host="127.0.0.1", port=0, max_sessions=2)
    assert srv.port == 0 and not srv.running
    with srv as started:
        assert started is srv
        assert srv.host == "127.0.0.1"
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        assert srv.ws_url == f"ws://127.0.0.1:{srv.port}/ws"
        assert srv.max_sessions == 2
        assert srv.active_sessions == 0
        assert "CounterEnv" in repr(srv)
    assert not srv.running


# --------------------------------------------------------------------------- reset kwargs


def test_reset_kwargs_are_filtered_by_signature() -> None:
    rec = Recorder()
    with EnvServer(rec) as srv, ws(srv) as conn:
        ask(conn, {"type": "reset", "data": {"seed": -1, "start": 4, "bogus": 1, "self": 2}})
        ask(conn, {"type": "reset", "data": {}})
    assert rec.envs[0].reset_calls == [
        {"seed": -1, "episode_id": None, "start": 4},  # no seed validation on /ws
        {"seed": None, "episode_id": None, "start": 0},
    ]


def test_reset_kwargs_all_pass_with_var_keyword() -> None:
    with EnvServer(KwargsEnv) as srv, ws(srv) as conn:
        reply = ask(conn, {"type": "reset", "data": {"seed": 1, "anything": [1, 2]}})
    assert reply["data"]["metadata"] == {"seen": {"seed": 1, "episode_id": None, "anything": [1, 2]}}


def test_filter_kwargs_unit() -> None:
    def plain(a: int, *, b: int = 0) -> None: ...

    def posonly(a: int, /, b: int = 0) -> None: ...

    def varkw(a: int, **kw: Any) -> None: ...

    kwargs = {"a": 1, "b": 2, "c": 3}
    assert filter_kwargs(plain, kwargs) == {"a": 1, "b": 2}
    assert filter_kwargs(posonly, kwargs) == {"b": 2}
    assert filter_kwargs(varkw, kwargs) == kwargs
    env = CounterEnv()
    assert filter_kwargs(env.reset, {"self": 1, "seed": 2, "x": 3}) == {"seed": 2}


def test_environment_is_abstract() -> None:
    with pytest.raises(TypeError):
        Environment()  # type: ignore[abstract]
    assert Environment.action_type is Action
    assert Environment.observation_type is Observation
    assert Environment.state_type is State
    assert Environment.SUPPORTS_CONCURRENT_SESSIONS is True
    Environment.close(CounterEnv())  # the default close() is a no-op


# --------------------------------------------------------------------------- CLI


def _start_cli(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()
) -> tuple[subprocess.Popen[str], str, threading.Thread]:
    """Start ``python -m openenv ...``; return the process and the URL of its ready line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=pass_fds,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            proc.wait()
            raise AssertionError("the server never printed its ready line") from None
        if line.startswith("serving "):
            return proc, line.rsplit(" on ", 1)[1].strip(), reader


def _stop_cli(proc: subprocess.Popen[str], reader: threading.Thread) -> int:
    proc.terminate()
    try:
        code = proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
        assert proc.stderr is not None
        proc.stderr.close()
    return code


def test_cli_serve_echo(tmp_path: Path) -> None:
    proc, url, reader = _start_cli(["serve", "echo", "--port", "0"], cwd=tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "/health").json() == {"status": "healthy"}
        assert httpx.get(url + "/metadata").json()["name"] == "EchoEnvironment"
        with connect(url.replace("http", "ws", 1) + "/ws", open_timeout=5) as conn:
            ask(conn, {"type": "reset"})
            assert ask(conn, {"type": "step", "data": {"message": "hi"}})["data"]["reward"] == 0.2
    finally:
        code = _stop_cli(proc, reader)
    assert code == 0  # SIGTERM stops it cleanly


@pytest.mark.parametrize("transport", ["asyncio", "threads", "asgi"])
def test_cli_serve_on_a_socket_its_parent_bound(tmp_path: Path, transport: str) -> None:
    """``serve --fd N`` (``ProcessProvider``'s ``{fd}``): the server listens on the socket the parent bound.

    The parent binds (without listening) and hands the socket down: the port is the server's from the
    bind on, and the server makes it listen with its backlog.
    """
    if transport == "asgi":
        pytest.importorskip("uvicorn")
    how = ["--asgi"] if transport == "asgi" else ["--transport", transport]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        fd = sock.fileno()
        proc, url, reader = _start_cli(["serve", "echo", "--fd", str(fd), *how], cwd=tmp_path, pass_fds=(fd,))
    try:
        assert url == f"http://127.0.0.1:{port}"
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5) as conn:
            ask(conn, {"type": "reset"})
            reply = ask(conn, {"type": "step", "data": {"message": "fd"}})
            assert reply["data"]["observation"]["echoed_message"] == "fd"
    finally:
        code = _stop_cli(proc, reader)
    assert code == 0


@pytest.mark.parametrize("transport", ["asyncio", "threads"])
def test_env_server_serves_once_on_a_given_socket(transport: str) -> None:
    from .test_server_limits import _listen_backlog

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = EnvServer(EchoEnvironment, sock=sock, transport=transport, backlog=300)  # type: ignore[arg-type]
    assert (server.host, server.port, server.url) == ("127.0.0.1", port, f"http://127.0.0.1:{port}")
    with server:
        assert _listen_backlog(port) == 300  # asyncio's create_server(sock=) listened again with its 100
        with connect(server.ws_url, open_timeout=5) as conn:
            ask(conn, {"type": "reset"})
            assert ask(conn, {"type": "step", "data": {"message": "x"}})["data"]["observation"]["echoed_message"] == "x"
    assert sock.fileno() == -1  # the server owned it: stop() closed it
    with pytest.raises(RuntimeError, match=r"stop\(\) closed it"):
        server.start()
    early = socket.socket()
    early.bind(("127.0.0.1", 0))
    server = EnvServer(EchoEnvironment, sock=early, transport=transport)  # type: ignore[arg-type]
    early.close()
    with pytest.raises(RuntimeError, match=r"closed before start\(\)"):
        server.start()


def test_env_server_refuses_a_socket_it_cannot_serve_on(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="sock must be a socket.socket or None, not int"):
        EnvServer(EchoEnvironment, sock=3)  # type: ignore[arg-type]
    advice = r"; pass a TCP socket bound with sock.bind\(\(host, port\)\)"
    with socket.socket() as unbound:  # listen() would pick a port on every interface
        with pytest.raises(ValueError, match=r"^sock is not bound to an address" + advice):
            EnvServer(EchoEnvironment, sock=unbound)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        with pytest.raises(ValueError, match=r"^sock is not a TCP \(stream\) socket" + advice):
            EnvServer(EchoEnvironment, sock=udp)
    with socket.socket(socket.AF_UNIX) as unix:  # the family says it all (a path can be too long to bind here)
        with pytest.raises(ValueError, match=r"^sock is not an IPv4 or IPv6 socket \(AF_UNIX\)"):
            EnvServer(EchoEnvironment, sock=unix)
    with socket.create_server(("127.0.0.1", 0)) as listener, socket.create_connection(listener.getsockname()) as peer:
        with pytest.raises(ValueError, match=r"^sock is connected to a peer, not a listener"):
            EnvServer(EchoEnvironment, sock=peer)
    closed = socket.socket()
    closed.close()
    with pytest.raises(ValueError, match="^sock is closed"):
        EnvServer(EchoEnvironment, sock=closed)


def test_cli_serve_fd_errors_are_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "echo", "--fd", "3", "--port", "0"]) == 2
    assert "--fd serves on the socket it names: leave out --host and --port" in capsys.readouterr().err
    with open(tmp_path / "file", "w") as not_a_socket:
        fd = not_a_socket.fileno()
        assert cli.main(["serve", "echo", "--fd", str(fd)]) == 2
        assert f"error: --fd {fd}: not an open socket (Socket operation on non-socket)\n" == capsys.readouterr().err
        assert not not_a_socket.closed and os.fstat(fd)  # left as it was
    with socket.socket() as unbound:
        fd = unbound.fileno()
        assert cli.main(["serve", "echo", "--fd", str(fd)]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"error: --fd {fd}: the socket is not bound to an address; "
            "hand down a TCP socket bound to the address to serve on\n"
        )
        assert unbound.fileno() >= 0  # not closed by the refusal


@pytest.mark.parametrize("transport", ["asyncio", "threads", "asgi"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_cli_serve_closes_every_session_with_1012_on_ctrl_c_and_sigterm(
    tmp_path: Path, transport: str, sig: str
) -> None:
    """Ctrl-C / SIGTERM to ``serve``: each open session gets its 1012 close, and the process exits 0.

    (On CPython < 3.13 the main thread's interrupted ``join`` returned at once afterwards, so the
    asyncio transport's process exited before its loop closed the sessions: clients saw a drop.
    Under ``--asgi``, uvicorn raised the signal again after its shutdown: a traceback, status -2/-15.)
    """
    import signal

    if transport == "asgi":
        pytest.importorskip("uvicorn")
    how = ["--asgi"] if transport == "asgi" else ["--transport", transport]
    proc, url, reader = _start_cli(["serve", "echo", "--port", "0", *how], cwd=tmp_path)
    try:
        with connect(url.replace("http", "ws", 1) + "/ws", open_timeout=5) as conn:
            ask(conn, {"type": "reset"})
            proc.send_signal(getattr(signal, sig))
            with pytest.raises(ConnectionClosed) as closed:
                conn.recv(timeout=15)
            assert closed.value.rcvd is not None, "the connection dropped without a close frame"
            assert closed.value.rcvd.code == 1012
            assert closed.value.rcvd.reason == ("" if transport == "asgi" else "server stopping")  # uvicorn's: none
        assert proc.wait(timeout=15) == 0
    finally:
        _stop_cli(proc, reader)


def test_cli_serve_module_factory_and_env_capacity(tmp_path: Path) -> None:
    (tmp_path / "myenvs.py").write_text(
        textwrap.dedent(
            """
            from openenv.server.echo import EchoEnvironment

            class Shouty(EchoEnvironment):
                pass

            def make():
                return Shouty()
            """
        )
    )
    proc, url, reader = _start_cli(
        ["serve", "myenvs:make", "--port", "0"], cwd=tmp_path, env={"MAX_CONCURRENT_ENVS": "2"}
    )
    try:
        assert httpx.get(url + "/metadata").json()["name"] == "Shouty"
        ws_url = url.replace("http", "ws", 1) + "/ws"
        with connect(ws_url) as a, connect(ws_url) as b:
            assert ask(a, {"type": "state"})["type"] == "state"
            assert ask(b, {"type": "state"})["type"] == "state"
            with pytest.raises(InvalidStatus) as refused:
                connect(ws_url)
            data = error(json.loads(refused.value.response.body))
            assert (data["code"], data["max_sessions"]) == ("CAPACITY_REACHED", 2)
    finally:
        _stop_cli(proc, reader)


def test_cli_serve_echo_allows_eight_sessions_by_default(tmp_path: Path) -> None:
    """`serve echo` as the quick start writes it serves the quick start's pools (like OpenEnv's echo_env)."""
    env = {k: v for k, v in os.environ.items() if k != "MAX_CONCURRENT_ENVS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("serving "), line
        ws_url = line.split(" on ", 1)[1].strip().replace("http", "ws", 1) + "/ws"
        with contextlib.ExitStack() as stack:
            for _ in range(8):
                conn = stack.enter_context(connect(ws_url))
                assert ask(conn, {"type": "state"})["type"] == "state"
            with pytest.raises(InvalidStatus) as refused:
                connect(ws_url)
            data = error(json.loads(refused.value.response.body))
            assert (data["code"], data["max_sessions"]) == ("CAPACITY_REACHED", 8)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()


def test_cli_serve_default_capacity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_CONCURRENT_ENVS", raising=False)
    assert cli_serve._default_max_sessions("echo") == 8
    assert cli_serve._default_max_sessions("openenv.server.echo:EchoEnvironment") == 8
    assert cli_serve._default_max_sessions("openenv.server.tools_demo:ToolsDemoEnvironment") == 8
    assert cli_serve._default_max_sessions("my_pkg.envs:ChessEnv") == 1  # EnvServer's and create_app's default
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "3")
    assert cli_serve._default_max_sessions("echo") == 3
    assert cli_serve._default_max_sessions("my_pkg.envs:ChessEnv") == 3


def test_cli_serve_bad_factory(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "no_such_module_xyz:Env"]) == 2
    assert "error: cannot load" in capsys.readouterr().err
    assert cli.main(["serve", "missing-colon"]) == 2
    assert cli.main(["serve", "openenv.server.echo:Nope"]) == 2


def test_cli_load_factory() -> None:
    assert cli.load_factory("echo") is EchoEnvironment
    assert cli.load_factory("openenv.server.echo:EchoEnvironment") is EchoEnvironment


def test_cli_run_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "reset:" in out
    assert 'step 3: action={"message": "hello 3"}' in out
    assert "3 steps, mean step latency" in out


def test_cli_run_against_url(capsys: pytest.CaptureFixture[str]) -> None:
    with EnvServer(EchoEnvironment) as srv:
        assert cli.main(["run", srv.url, "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "started" not in out
    assert "2 steps, mean step latency" in out


def test_cli_run_error_exits_1(capsys: pytest.CaptureFixture[str], free_port: int) -> None:
    assert cli.main(["run", f"http://127.0.0.1:{free_port}", "--steps", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_tls_server_urls_and_bad_ssl(tls_server: Any) -> None:
    assert tls_server.url.startswith("https://127.0.0.1:")
    assert tls_server.ws_url.startswith("wss://127.0.0.1:") and tls_server.ws_url.endswith("/ws")
    with pytest.raises(TypeError, match="ssl"):
        EnvServer(EchoEnvironment, ssl="cert.pem")  # type: ignore[arg-type]


def test_echo_server_fixture_is_plain(echo_server: EnvServer) -> None:
    """The shared ``echo_server`` fixture serves the echo environment under its class name, without tools."""
    assert echo_server.name == "EchoEnvironment"
    assert tools_of(EchoEnvironment()) == {}


def test_cli_serve_threads_says_it_is_unfit_for_connect_storms_and_takes_a_backlog(tmp_path: Path) -> None:
    # issue 32: the threading transport cannot hold 1,000 simultaneous opens; serve says so, after its ready line
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_SERVER_TRANSPORT"}
    command = [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--transport", "threads"]
    proc = subprocess.Popen(
        [*command, "--backlog", "512"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("serving "), line
        note = proc.stderr.readline()
        assert note.startswith("note: the threads transport") and "unfit for hundreds of clients" in note, note
        from .test_server_limits import _listen_backlog

        assert _listen_backlog(int(line.rsplit(":", 1)[1])) == 512
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()
