"""The rules of OpenEnv harness sessions (``openenv._core.harness``): no server, no OpenEnv."""

from __future__ import annotations

from types import SimpleNamespace

from openenv._core import harness as core
from openenv._core import trl as trl_core


def test_initial_messages_append_the_reset_text_as_trl_does() -> None:
    text = "\n\nready"
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."}]
    expected = [prompt[0], {"role": "user", "content": "Go.\n\nready"}]
    assert core.initial_messages({"prompt": prompt, "seed": 1}, text) == expected
    assert prompt[1]["content"] == "Go."  # the task is not changed
    assert core.initial_messages("Go.", text) == [{"role": "user", "content": "Go.\n\nready"}]
    assert core.initial_messages(None, text) == [{"role": "user", "content": "ready"}]
    assert core.initial_messages(None, None) == [{"role": "user", "content": ""}]
    # a last message that is not a user's text: the reset text is a user message of its own
    parts = [{"role": "user", "content": [{"type": "text", "text": "Go."}]}]
    assert core.initial_messages(parts, text)[-1] == {"role": "user", "content": "ready"}


def test_reset_kwargs_take_the_row_and_the_explicit_seed_and_episode() -> None:
    assert core.reset_kwargs({"prompt": "p", "seed": 1, "level": 2}, 5, "e") == {
        "prompt": "p",
        "seed": 5,
        "level": 2,
        "episode_id": "e",
    }
    assert core.reset_kwargs("just a prompt", None, None) == {}


def test_manifest_lists_mcp_tools_by_their_names_or_one_action_tool() -> None:
    tools = [SimpleNamespace(name="my-tool", description="Does it.", input_schema={"type": "object", "properties": {}})]
    methods = trl_core.plan_methods(tools)[0]
    entries = core.manifest(tools, methods, None)
    assert [(e.name, e.method) for e in entries] == [("my-tool", methods[0].name)]
    action = {
        "type": "object",
        "properties": {"message": {"type": "string"}, "metadata": {"type": "object"}},
        "required": ["message", "metadata"],
    }
    (entry,) = core.manifest([], [trl_core.step_spec(action)], action)
    assert entry.name == core.ACTION_TOOL == "action" and entry.method == "step"  # OpenEnv reserves "step"
    properties = {"message": {"type": "string"}}
    assert entry.input_schema == {"type": "object", "properties": properties, "required": ["message"]}


def test_tool_metadata_carries_the_episode_reward_as_verify_does() -> None:
    assert core.tool_metadata(1.5, -0.5, True) == {"reward": 1.5, "step_reward": -0.5, "done": True}
    assert "add, greet" in core.unknown_tool_message("nope", ["add", "greet"])
