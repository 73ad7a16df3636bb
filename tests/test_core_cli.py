"""The command line's sans-IO decisions (`openenv._core.cli`)."""

from __future__ import annotations

from openenv._core.cli import compact, compact_json, did_you_mean, observation_error, pick_tool, plural
from openenv._core.tool_models import Tool


def test_numbers_people_read() -> None:
    assert compact_json(0.1 + 0.6) == "0.7" and compact_json(1.0) == "1" and compact_json(None) == "None"
    assert compact_json(1e-12) == "1e-12" and compact_json(3) == "3" and compact_json(float("inf")) == "inf"
    assert compact({"r": [0.1 + 0.2, {"x": 2.675 * 3}], "n": 1}) == {"r": [0.3, {"x": 8.025}], "n": 1}
    assert plural(1, "step") == "1 step" and plural(0, "step") == "0 steps" and plural(2, "tool call") == "2 tool calls"


def test_error_observations() -> None:
    assert observation_error({"echoed_message": "hi"}) is None
    assert observation_error({"error": None, "tool_name": "x"}) is None
    assert observation_error("text") is None
    mcp = {"tool_name": "", "error": {"error_type": "invalid_args", "message": "call_tool needs a tool_name"}}
    assert observation_error(mcp) == "invalid_args: call_tool needs a tool_name"
    named = {"tool_name": "add", "error": {"error_type": "execution_error", "message": "boom"}}
    assert observation_error(named) == "tool 'add': execution_error: boom"
    assert observation_error({"error": "Unknown tool: ''"}) == "Unknown tool: ''"


def test_the_tool_a_bare_run_calls() -> None:
    add = Tool(name="add", input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    hint = Tool(name="hint", input_schema={"type": "object", "properties": {}})
    impossible = Tool(
        name="pick",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
            "required": ["n"],
        },
    )
    assert pick_tool([add, hint]) == (hint, {})  # no required parameters first
    assert pick_tool([add]) == (add, {"a": 0})
    assert pick_tool([impossible]) is None
    assert pick_tool([]) is None


def test_did_you_mean() -> None:
    assert did_you_mean("rn", ["run", "schema", "tools"]) == " (did you mean 'run'?)"
    assert did_you_mean("xyz", ["run", "schema"]) == ""
