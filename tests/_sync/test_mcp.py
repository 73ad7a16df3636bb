# GENERATED from tests/_async/test_mcp.py by scripts/run_unasync.py -- DO NOT EDIT.
"""MCP tools through ``Env`` against our server (written once, generated for the sync twin)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openenv.sync import (
    Codec,
    ConnectError,
    Env,
    InvalidActionType,
    Observation,
    ServerValidationError,
    SessionLost,
    Tool,
    ToolError,
    ToolNotFound,
    ToolResult,
)
from openenv.server import EnvServer
from openenv.server.tools_demo import ToolsDemoEnvironment

from ..envs import PenaltyToolsEnv, ScoredToolsEnv, ToolCallObservation


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
        assert (result.reward, result.done) == (1.0, False)  # a step: the demo scores a call that answers 1.0


def test_argument_called_name(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        result = env.call_tool("greet", name="Ada", punctuation="?")
        assert result.data == "Hello, Ada?"


def test_tool_calls_are_steps_listing_is_not(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        env.reset()
        env.list_tools()  # an mcp frame: not a step
        assert (env.state())["step_count"] == 0
        env.call_tool("add", a=1, b=1)  # the call_tool step action, as OpenEnv's client sends it
        state = env.state()
        assert state["step_count"] == 1
        assert state["tool_calls"] == 1  # against this session's environment


def test_call_tool_carries_the_steps_reward_and_done(server_factory: Callable[..., Any]) -> None:
    server = server_factory(ScoredToolsEnv, max_sessions=2)
    with Env(server.url) as env:
        env.reset()
        wrong = env.call_tool("guess", n=3)
        assert (wrong.data, wrong.reward, wrong.done) == ("wrong", 0.0, False)
        right = env.call_tool("guess", n=7)
        assert (right.data, right.text, right.is_error) == ("right", "right", False)
        assert (right.reward, right.done) == (1.0, True)
        assert (env.state())["step_count"] == 2


def test_a_failed_tool_call_is_a_step_with_its_reward_and_done(server_factory: Callable[..., Any]) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=2)
    with Env(server.url) as env:
        env.reset()
        with pytest.raises(ToolError) as info:
            env.call_tool("fail", message="bad")
        failed = info.value
        assert (failed.reward, failed.done) == (-1.0, False)  # the environment's penalty reaches the caller
        assert failed.message == "Error calling tool 'fail': bad"
        assert failed.result is not None and failed.result.reward == -1.0
        assert failed.result.observation["error"]["error_type"] == "execution_error"
        assert (env.state())["step_count"] == 1  # the failed call was counted
        assert (env.call_tool("add", a=1, b=2)).reward == 0.5
        with pytest.raises(ToolNotFound) as unknown:  # an unknown tool: the second failure ends the episode
            env.call_tool("nope")
        assert (unknown.value.reward, unknown.value.done) == (-1.0, True)
        assert (env.state())["step_count"] == 3


def test_a_failed_tool_call_of_the_demo_scores_zero(tools_server: Any) -> None:
    with Env(tools_server.url) as env:
        with pytest.raises(ToolError) as info:
            env.call_tool("fail", message="bad")
        assert (info.value.reward, info.value.done) == (0.0, False)  # the demo scores a failed call 0
        assert info.value.result is not None  # but it was a step


def test_call_tool_sends_the_step_action(script_server: Callable[..., Any]) -> None:
    def reply(frame: str) -> str:
        if json.loads(frame)["data"].get("drop"):
            raise ConnectionAbortedError("the script ends: the server closes the connection without a reply")
        observation = {"tool_name": "add", "result": {"data": 3, "content": [], "is_error": False}, "error": None}
        return json.dumps({"type": "observation", "data": {"observation": observation, "reward": 0.5, "done": True}})

    server = script_server(reply)
    with Env(server.url) as env:
        result = env.call_tool("add", a=1, b=2)
        assert (result.data, result.reward, result.done) == (3, 0.5, True)
        assert json.loads(server.received[-1]) == {
            "type": "step",
            "data": {"type": "call_tool", "tool_name": "add", "arguments": {"a": 1, "b": 2}},
        }
        with pytest.raises(InvalidActionType):  # not JSON: refused before sending
            env.call_tool("add", a={1, 2})
        assert len(server.received) == 1
        # a step: the episode is in progress, so the connection lost now loses it, and the next step
        # says so rather than reconnecting (as it would before any episode)
        with pytest.raises(SessionLost):
            env.step({"drop": True})
        with pytest.raises(SessionLost, match=r"reset\(\)"):
            env.step({"message": "again"})
        assert len(server.received) == 2  # the last step was never sent


def test_list_tools_is_cached_per_client(script_server: Callable[..., Any]) -> None:
    def reply(frame: str) -> str:
        request = json.loads(frame)["data"]
        tools = [{"name": "add", "inputSchema": {"type": "object"}}]
        return json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": tools}}})

    server = script_server(reply)
    with Env(server.url) as env:
        assert [t.name for t in env.list_tools()] == ["add"]
        assert [t.name for t in env.list_tools()] == ["add"]
        assert (env.get_tool("add")).name == "add"
        assert len(server.received) == 1  # asked once
        env.list_tools(use_cache=False)
        assert len(server.received) == 2
        child = env.new_session()
        child.list_tools()  # the same server: the same tools
        assert len(server.received) == 2


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
        with pytest.raises(ServerValidationError):  # the call_tool step action is not an EchoAction
            env.call_tool("add", a=1)
        env.reset()  # the session is still usable


def test_from_schema_resets_an_mcp_environment(server_factory: Callable[..., Any]) -> None:
    server = server_factory(ScoredToolsEnv, max_sessions=2)
    with Env.from_schema(server.url) as env:
        result = env.reset()  # the reset observation is not the schema's CallToolObservation
        assert result.observation.metadata == {"ready": True}
        assert result.observation.done is False
        assert (env.call_tool("guess", n=7)).reward == 1.0
        assert (env.state()).step_count == 1


def test_typed_reset_observation(server_factory: Callable[..., Any]) -> None:
    server = server_factory(ScoredToolsEnv, max_sessions=2)
    codec: Codec[Any, Any, Any] = Codec(observation=ToolCallObservation, reset_observation=Observation)
    with Env(server.url, codec=codec) as env:
        reset = env.reset()
        assert type(reset.observation) is Observation and reset.observation.metadata == {"ready": True}
        step = env.step({})
        assert isinstance(step.observation, ToolCallObservation) and step.observation.metadata == {"plain_step": True}


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
