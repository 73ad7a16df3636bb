# GENERATED from tests/_async/test_mcp.py by scripts/run_unasync.py -- DO NOT EDIT.
"""MCP tools through ``Env`` against our server (written once, generated for the sync twin)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from openenv.sync import ConnectError, Env, Tool, ToolError, ToolNotFound, ToolResult
from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment
from openenv.server.tools_demo import ToolsDemoEnvironment


@pytest.fixture(scope="module")
def tools_server() -> Iterator[EnvServer]:
    with EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0, max_sessions=8) as server:
        yield server


def test_list_and_call_tools(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        tools = env.list_tools()
        assert sorted(t.name for t in tools) == ["add", "fail", "greet"]
        assert all(isinstance(t, Tool) for t in tools)
        add = env.get_tool("add")
        assert add.input_schema["required"] == ["a", "b"]
        result = env.call_tool("add", a=2, b=40)
        assert isinstance(result, ToolResult)
        assert (result.data, result.text, result.is_error) == (42, "42", False)
        assert result.structured_content == {"result": 42}
        assert result.reward is None


def test_argument_called_name(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        result = env.call_tool("greet", name="Ada", punctuation="?")
        assert result.data == "Hello, Ada?"


def test_tool_calls_are_not_steps(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        env.reset()
        env.call_tool("add", a=1, b=1)
        state = env.state()
        assert state["step_count"] == 0  # mcp frames do not call step
        assert state["tool_calls"] == 1  # but they run against this session's environment


def test_tool_errors_are_raised(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        with pytest.raises(ToolError) as info:
            env.call_tool("fail", message="bad")
        assert info.value.code == -32603
        assert info.value.message == "Error calling tool 'fail': bad"
        with pytest.raises(ToolNotFound):
            env.call_tool("nope")
        with pytest.raises(ToolError, match="a"):
            env.call_tool("add", a="x", b=1)
        with pytest.raises(ToolNotFound, match="add, fail, greet"):
            env.get_tool("missing")
        assert (env.call_tool("add", a=1, b=2)).data == 3  # the session goes on


def test_step_loop_actions(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        listed = env.step({"type": "list_tools"})
        assert [t["name"] for t in listed.observation["tools"]] == ["add", "fail", "greet"]
        called = env.step({"type": "call_tool", "tool_name": "add", "arguments": {"a": 4, "b": 5}})
        assert called.observation["result"]["data"] == 9
        failed = env.step({"type": "call_tool", "tool_name": "nope", "arguments": {}})
        assert failed.observation["error"]["error_type"] == "tool_not_found"


def test_no_mcp_support_is_an_error_not_an_empty_list(echo_server: Any) -> None:
    with Env(echo_server.url) as env:
        with pytest.raises(ToolError) as info:
            env.list_tools()
        assert info.value.code == -32603
        assert "does not support MCP" in info.value.message
        env.reset()  # the session is still usable


def test_production_mode_needs_post_mcp(tools_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_CLIENT_MODE", "production")
    env = Env(tools_server.url)
    assert env.mode == "production"
    with pytest.raises(ConnectError, match="production mode"):
        env.connect()
    env.close()
    with pytest.raises(ValueError):
        Env(tools_server.url, mode="bogus")


def test_new_session_has_its_own_tools_state(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        env.call_tool("add", a=1, b=1)
        child = env.new_session()
        child.call_tool("add", a=1, b=1)
        child.call_tool("add", a=1, b=1)
        assert (env.state())["tool_calls"] == 1
        assert (child.state())["tool_calls"] == 2


def test_echo_server_fixture_is_plain(echo_server: Any) -> None:
    assert echo_server.name == EchoEnvironment.__name__ or echo_server.name
