"""Sans-IO codec decisions: unions, reset observations, action checks, adopted OpenEnv clients."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import pytest
from pydantic import BaseModel, Field

from openenv._core.codec import as_codec, client_step_result, is_client_class
from openenv.sync import (
    Codec,
    InvalidAction,
    InvalidActionType,
    Observation,
    OpenEnvError,
    ParseError,
    State,
    StepResult,
)

from .envs import CounterAction, CounterClient, CounterObservation, CounterState, ReleasedStepResult


class Move(BaseModel):
    type: Literal["move"] = "move"
    dx: int


class Say(BaseModel):
    type: Literal["say"] = "say"
    text: str


class Moved(Observation):
    kind: Literal["moved"] = "moved"
    x: int


class Said(Observation):
    kind: Literal["said"] = "said"
    text: str


UNIONS: list[Any] = [
    Move | Say,
    Union[Move, Say],  # noqa: UP007 - the spelling under test
    [Move, Say],
    Annotated[Move | Say, Field(discriminator="type")],
]


@pytest.mark.parametrize("spec", UNIONS)
def test_action_unions(spec: Any) -> None:
    codec: Codec[Any, Any, Any] = Codec(action=spec)
    assert codec._step_payload({"type": "say", "text": "hi"}) == {"type": "say", "text": "hi"}
    assert codec._step_payload({"type": "move", "dx": 2}) == {"type": "move", "dx": 2}
    assert codec._step_payload(Say(text="x")) == {"type": "say", "text": "x"}  # any member's instance
    assert codec._step_payload(Move(dx=1)) == {"type": "move", "dx": 1}
    with pytest.raises(InvalidAction) as info:
        codec._step_payload({"type": "move", "dx": "far"})
    assert info.value.errors and not isinstance(info.value, InvalidActionType)
    with pytest.raises(InvalidActionType, match="Move | Say"):
        codec._step_payload(State())  # a model outside the union
    with pytest.raises(InvalidActionType):
        codec._step_payload(42)
    assert "Move | Say" in repr(codec)


@pytest.mark.parametrize("spec", [Moved | Said, [Moved, Said], Annotated[Moved | Said, Field(discriminator="kind")]])
def test_observation_unions_are_chosen_by_shape(spec: Any) -> None:
    codec: Codec[Any, Any, Any] = Codec(observation=spec)
    moved = codec._parse_result({"observation": {"kind": "moved", "x": 3}, "reward": 1, "done": True})
    assert isinstance(moved.observation, Moved) and (moved.observation.x, moved.observation.done) == (3, True)
    said = codec._parse_result({"observation": {"kind": "said", "text": "t", "metadata": {"m": 1}}, "reward": None})
    assert isinstance(said.observation, Said) and said.observation.metadata == {"m": 1}
    with pytest.raises(ParseError) as info:
        codec._parse_result({"observation": {"kind": "nothing"}})
    assert info.value.payload == {"observation": {"kind": "nothing"}}


def test_codec_types_are_checked_at_construction() -> None:
    bads: list[Any] = [int, dict, "Move", list[int], Move | int, [], 3]
    for bad in bads:
        with pytest.raises(TypeError, match="pydantic model"):
            Codec(action=bad)
        with pytest.raises(TypeError):
            Codec(observation=bad)
    with pytest.raises(TypeError):
        Codec(state=int)
    with pytest.raises(TypeError):
        Codec(reset_observation=int)


def test_reset_observation_model() -> None:
    codec: Codec[Any, Any, Any] = Codec(observation=Moved, reset_observation=Observation)
    reset = codec._parse_reset({"observation": {"metadata": {"ready": True}}, "reward": None, "done": False})
    assert type(reset.observation) is Observation and reset.observation.metadata == {"ready": True}
    with pytest.raises(ParseError):
        codec._parse_result({"observation": {"metadata": {}}})
    plain: Codec[Any, Any, Any] = Codec(observation=Moved)  # no reset model: resets parse like steps
    with pytest.raises(ParseError):
        plain._parse_reset({"observation": {"metadata": {}}})


MCP_SCHEMA = {
    "action": {
        "title": "CallToolAction",
        "type": "object",
        "properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["tool_name"],
    },
    "observation": {
        "title": "CallToolObservation",
        "type": "object",
        "properties": {"tool_name": {"type": "string"}, "result": {}, "done": {"type": "boolean"}},
        "required": ["tool_name"],
    },
}


def test_schema_codec_never_fails_a_reset_for_its_shape() -> None:
    codec = Codec.from_schema(MCP_SCHEMA)
    reset = codec._parse_reset({"observation": {"metadata": {"r": 1}, "board": [1]}, "reward": None, "done": False})
    observation = reset.observation
    assert (observation.done, observation.reward, observation.metadata) == (False, None, {"r": 1})
    assert observation.board == [1]  # extra keys kept
    matching = codec._parse_reset({"observation": {"tool_name": "t"}, "done": False})
    assert type(matching.observation).__name__ == "CallToolObservation"
    with pytest.raises(ParseError):  # a step must match
        codec._parse_result({"observation": {"metadata": {}}})
    with_reset = Codec.from_schema(
        {
            **MCP_SCHEMA,
            "reset_observation": {"title": "Board", "type": "object", "properties": {"n": {"type": "integer"}}},
        }
    )
    assert type(with_reset._parse_reset({"observation": {"n": 2}}).observation).__name__ == "Board"


def test_parse_errors_keep_the_reply() -> None:
    codec: Codec[Any, Any, Any] = Codec(state=CounterState)
    with pytest.raises(ParseError) as info:
        codec._parse_state({"step_count": -1})
    assert (info.value.kind, info.value.payload) == ("state", {"step_count": -1})
    assert isinstance(info.value, OpenEnvError) and isinstance(info.value, ValueError)


def test_adopted_client_hooks_without_init() -> None:
    assert is_client_class(CounterClient) and not is_client_class(CounterClient.__new__(CounterClient))
    codec = Codec.from_client(CounterClient)
    assert as_codec(CounterClient).action_type is CounterAction  # from EnvClient[...]'s arguments
    assert codec.observation_type is CounterObservation
    assert codec._step_payload(CounterAction(delta=2)) == {"delta": 2}
    payload = {"observation": {"count": 2, "metadata": {"step": 1}}, "reward": 2, "done": False}
    result = codec._parse_result(payload)
    assert isinstance(result, StepResult) and isinstance(result.observation, CounterObservation)
    assert (result.reward, result.done, result.metadata) == (2.0, False, {"step": 1})
    assert codec._parse_reset(payload).observation.count == 2
    state = codec._parse_state({"episode_id": "e", "step_count": 1, "total": 2})
    assert isinstance(state, CounterState) and state.total == 2
    with pytest.raises(InvalidActionType, match="CounterClient._step_payload"):
        codec._step_payload({"delta": 1})  # its hook takes models only
    with pytest.raises(ParseError, match="CounterClient._parse_result") as info:
        codec._parse_result({"observation": {}})
    assert info.value.payload == {"observation": {}}
    with pytest.raises(ParseError) as state_info:
        codec._parse_state({})
    assert state_info.value.kind == "state"
    assert "CounterClient" in repr(codec)


def test_client_step_result_conversion() -> None:
    observation = object()
    converted = client_step_result(ReleasedStepResult(observation, 1, True), {"observation": {"metadata": {"a": 1}}})
    assert converted.observation is observation  # kept as is
    assert (converted.reward, converted.done, converted.metadata) == (1.0, True, {"a": 1})
    ours = StepResult({"x": 1})
    assert client_step_result(ours, {}) is ours
    with pytest.raises(ParseError):
        client_step_result({"observation": 1}, {})


def test_as_codec() -> None:
    codec: Codec[Any, Any, Any] = Codec()
    assert as_codec(codec) is codec
    assert as_codec(None)._step_payload({"a": 1}) == {"a": 1}

    class Echo(Codec[Any, Any, Any]):
        action_type = Move

    assert isinstance(as_codec(Echo), Echo)
    with pytest.raises(TypeError, match="from_schema"):
        as_codec("schema")
    with pytest.raises(TypeError, match="EnvClient"):
        as_codec(object())
    with pytest.raises(TypeError, match="not an OpenEnv client"):
        Codec.from_client(CounterClient.__new__(CounterClient))  # type: ignore[arg-type]


def test_generic_actions_must_be_json() -> None:
    codec: Codec[Any, Any, Any] = Codec()
    assert codec._step_payload({"a": {1, 2}}) == {"a": {1, 2}}  # checked when the frame is encoded
    with pytest.raises(InvalidActionType):
        codec._step_payload([1])


def test_a_step_calls_the_same_functions_as_the_hooks_a_few_calls_shorter() -> None:
    """``Codec._step_functions``: what ``Env`` calls on every step agrees with the hooks, overrides included."""
    import types

    from openenv._core.codec import Codec

    plain: Codec[Any, Any, Any] = Codec()
    encode, parse = plain._step_functions()
    action = {"message": "m"}
    assert encode(action) is action  # sent as is, never copied or modified
    assert encode(types.MappingProxyType({"a": 1})) == plain._step_payload(types.MappingProxyType({"a": 1}))
    with pytest.raises(InvalidActionType):
        encode(42)
    reply = {"observation": {"x": 1, "metadata": {"m": 2}}, "reward": 1, "done": True}
    assert parse(reply) == plain._parse_result(reply)

    class Shouting(Codec[Any, Any, Any]):  # an override is what a step calls
        def _parse_result(self, payload: dict[str, Any]) -> Any:
            return "parsed by the override"

    overridden: Any = Shouting()._step_functions()[1](reply)
    assert overridden == "parsed by the override"
    typed: Codec[Any, Any, Any] = Codec(action=CounterAction)
    encode, _ = typed._step_functions()
    assert encode(CounterAction(delta=2)) == typed._step_payload(CounterAction(delta=2))
