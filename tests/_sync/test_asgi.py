# GENERATED from tests/_async/test_asgi.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Our clients against the ASGI app (``openenv.server.asgi.create_app``) under uvicorn on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from openenv.sync import CapacityReached, Env, ExecutionError, ServerValidationError, ToolError, ToolNotFound
from openenv.server.tools_demo import ToolsDemoEnvironment

from ..envs import CounterEnv
from ..helpers_sync import until


def _until_free(server: Any) -> int:
    until(lambda: server.active_sessions == 0)  # the server ends a session when it sees the disconnect
    return int(server.active_sessions)


def test_production_mode_tools_against_the_asgi_server(asgi_server_factory: Any) -> None:
    server = asgi_server_factory(ToolsDemoEnvironment, max_sessions=1)
    with Env(server.url, mode="production") as env:
        env.reset()
        tools = env.list_tools()
        assert sorted(t.name for t in tools) == ["add", "fail", "greet"]
        assert (env.get_tool("add")).input_schema["required"] == ["a", "b"]
        assert (env.call_tool("add", a=2, b=40)).data == 42
        assert (env.call_tool("greet", name="Ada")).data == "Hello, Ada!"
        with pytest.raises(ToolError) as info:
            env.call_tool("fail", message="bad")
        assert info.value.code == -32603 and "bad" in info.value.message
        with pytest.raises(ToolNotFound):
            env.call_tool("nope")
        assert (env.state())["tool_calls"] == 2  # add, greet: the HTTP calls ran on the attached session
        assert server.active_sessions == 1  # one session for the HTTP calls and the WebSocket
    assert _until_free(server) == 0  # openenv/session/close ended it


def test_generic_client_against_the_asgi_server(asgi_server_factory: Any) -> None:
    server = asgi_server_factory(CounterEnv, max_sessions=2)
    with Env(server.url) as env:
        assert (env.reset(start=2)).observation["count"] == 2
        result = env.step({"delta": 3})
        assert (result.observation["count"], result.reward) == (5, 3.0)
        assert (env.state())["step_count"] == 1
        with pytest.raises(ServerValidationError):
            env.step({"delta": "x"})
        with pytest.raises(ExecutionError, match="boom"):
            env.step({"delta": 99})
        child = env.new_session()
        assert (child.step({"delta": 1})).observation["count"] == 1
        third = Env(server.url)
        with pytest.raises(CapacityReached) as cap:
            third.reset()
        assert (cap.value.active_sessions, cap.value.max_sessions) == (2, 2)
        third.close()
        child.close()
    assert _until_free(server) == 0
