"""Sans-IO MCP and schema helpers (tested once)."""

from __future__ import annotations

import pytest

from openenv._core import mcp
from openenv._core.schema import model_from_schema
from openenv.sync import (
    Codec,
    Env,
    InvalidAction,
    InvalidOption,
    ProtocolError,
    Tool,
    ToolError,
    ToolNotFound,
    ToolResult,
)


def test_tool_accepts_both_key_spellings() -> None:
    camel = Tool.model_validate({"name": "add", "inputSchema": {"type": "object"}, "title": "Add"})
    snake = Tool.model_validate({"name": "add", "input_schema": {"type": "object"}})
    assert camel.input_schema == snake.input_schema == {"type": "object"}
    assert camel.model_extra == {"title": "Add"}


def test_rpc_result_checks_the_reply_id() -> None:
    assert mcp.rpc_result({"jsonrpc": "2.0", "id": 3, "result": {"x": 1}}, 3) == {"x": 1}
    with pytest.raises(ProtocolError, match="does not answer"):
        mcp.rpc_result({"jsonrpc": "2.0", "id": 4, "result": {}}, 3)
    with pytest.raises(ProtocolError):
        mcp.rpc_result({"jsonrpc": "2.0", "id": 3}, 3)


def test_rpc_errors_become_tool_errors() -> None:
    error = {"code": -32603, "message": "Error calling tool 'fail': bad", "data": None}
    with pytest.raises(ToolError) as info:
        mcp.rpc_result({"jsonrpc": "2.0", "id": None, "error": error}, 1, tool="fail")
    assert (info.value.code, info.value.message, info.value.tool) == (-32603, error["message"], "fail")
    with pytest.raises(ToolNotFound):
        mcp.rpc_result({"id": 1, "error": {"code": -32603, "message": "Unknown tool: 'x'"}}, 1, tool="x")
    unsupported = mcp.tool_error({"code": -32603, "message": "Environment does not support MCP"})
    assert mcp.is_unsupported(unsupported)


def test_tool_result_shapes() -> None:
    snake = {
        "content": [{"type": "text", "text": "5"}],
        "structured_content": {"result": 5},
        "data": 5,
        "is_error": False,
    }
    assert mcp.parse_tool_result(snake).data == 5
    camel = {"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5}, "isError": False}
    parsed = mcp.parse_tool_result(camel)
    assert (parsed.data, parsed.text, parsed.is_error) == (5, "5", False)
    assert mcp.parse_tool_result(7) == ToolResult(data=7)


def test_step_loop_results() -> None:
    tools = mcp.parse_step_tools({"tools": [{"name": "a", "input_schema": {}}]})
    assert [t.name for t in tools] == ["a"]
    ok = {"tool_name": "a", "result": {"content": [], "data": 1, "is_error": False}, "error": None}
    assert mcp.parse_step_call(ok, "a", reward=0.5).reward == 0.5
    missing = {"tool_name": "b", "result": None, "error": {"error_type": "tool_not_found", "message": "no b"}}
    with pytest.raises(ToolNotFound) as info:
        mcp.parse_step_call(missing, "b")
    assert info.value.data["error_type"] == "tool_not_found"


def test_mode_and_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_CLIENT_MODE", raising=False)
    assert mcp.resolve_mode(None) == "simulation"
    monkeypatch.setenv("OPENENV_CLIENT_MODE", "PRODUCTION")
    assert mcp.resolve_mode(None) == "production"
    assert mcp.resolve_mode("simulation") == "simulation"
    with pytest.raises(InvalidOption, match="'simulation' or 'production'"):
        mcp.resolve_mode("prod")
    monkeypatch.setenv("OPENENV_CLIENT_MODE", "weird")
    with pytest.raises(InvalidOption, match="OPENENV_CLIENT_MODE"):
        mcp.resolve_mode(None)
    with pytest.raises(InvalidOption, match="mode must be"):
        Env("http://127.0.0.1:9", mode="weird")  # like every other option of Env
    assert mcp.attach_url("ws://h/p/ws?x=1", "abc") == "ws://h/p/ws?x=1&session_id=abc"
    ids = mcp.RpcIds()
    assert [ids.next(), ids.next()] == [1, 2]


SCHEMA = {
    "action": {
        "title": "MoveAction",
        "type": "object",
        "additionalProperties": False,
        "$defs": {
            "Dir": {"enum": ["n", "s"], "type": "string", "title": "Dir"},
            "Point": {
                "title": "Point",
                "type": "object",
                "properties": {"x": {"type": "integer", "minimum": 0}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            },
        },
        "properties": {
            "metadata": {"type": "object", "default": {}},
            "direction": {"$ref": "#/$defs/Dir"},
            "to": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": None},
            "speed": {"type": "number", "exclusiveMaximum": 10, "default": 1.0},
            "label": {"type": "string", "maxLength": 3},
            "model_name": {"type": "string", "default": "m"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "default": []},
        },
        "required": ["direction"],
    },
    "observation": {
        "title": "MoveObservation",
        "type": "object",
        "additionalProperties": False,
        "properties": {"pos": {"type": "integer", "default": 0}},
    },
    "state": {"title": "MoveState", "type": "object", "properties": {"step_count": {"type": "integer", "default": 0}}},
}


def test_codec_from_schema_validates_actions() -> None:
    codec = Codec.from_schema(SCHEMA)
    payload = codec._step_payload({"direction": "n", "to": {"x": 1, "y": 2}, "model_name": "q"})
    assert payload["to"] == {"x": 1, "y": 2}
    assert payload["model_name"] == "q"  # aliased field sent as the schema spells it
    assert payload["direction"] == "n"
    for bad in (
        {"direction": "w"},
        {"direction": "n", "to": {"x": -1, "y": 0}},
        {"direction": "n", "speed": 10},
        {"direction": "n", "label": "long"},
        {"direction": "n", "tags": ["a", "b", "c"]},
        {"direction": "n", "bogus": 1},
        {},
    ):
        with pytest.raises(InvalidAction):
            codec._step_payload(bad)
    result = codec._parse_result({"observation": {"pos": 3, "extra": True}, "reward": 1, "done": False})
    assert result.observation.pos == 3  # received models accept extra keys
    assert codec._parse_state({"step_count": 2, "total": 5}).step_count == 2


def test_model_from_schema_handles_recursion_and_odd_schemas() -> None:
    tree = {
        "title": "Node",
        "$defs": {
            "Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }
    model = model_from_schema(tree, "Tree", outgoing=True)
    assert model.model_validate({"root": {"kids": [{"kids": []}]}})
    assert model_from_schema({"type": "string"}, "Odd", outgoing=False).model_validate({})
    with pytest.raises(ValueError):
        model_from_schema({"properties": {"a": {"$ref": "http://x/y"}}}, "Bad", outgoing=True)


def test_a_failed_step_call_keeps_the_steps_reward_done_and_result() -> None:
    import pickle

    from openenv._core.result import StepResult

    observation = {"tool_name": "fail", "error": {"error_type": "execution_error", "message": "bad"}}
    step = StepResult(observation=observation, reward=-1.0, done=True)
    with pytest.raises(ToolError) as info:
        mcp.parse_step_call(observation, "fail", reward=-1.0, done=True, result=step)
    assert (info.value.reward, info.value.done, info.value.result) == (-1.0, True, step)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.message, copy.tool, copy.reward, copy.done, copy.result) == ("bad", "fail", -1.0, True, step)
    plain = ToolError("no MCP", code=-32603)  # not a step
    assert (plain.reward, plain.done, plain.result) == (None, False, None)
