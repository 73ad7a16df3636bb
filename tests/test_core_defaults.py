"""Default values built from JSON Schemas (sans-IO): ``openenv._core.defaults``."""

from __future__ import annotations

import datetime
import enum
import uuid
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from openenv._core.defaults import MISSING, NoDefault, default_value, describe_fields, describe_type
from openenv._core.models import Action
from openenv.server.echo import EchoAction
from openenv.server.tools_demo import ToolsDemoEnvironment

from .envs import ChessAction, CounterAction, WalkAction

# -- plain JSON Schema shapes ----------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, ""),
        ({"type": "integer"}, 0),
        ({"type": "number"}, 0.0),
        ({"type": "boolean"}, False),
        ({"type": "null"}, None),
        ({"type": "array"}, []),
        ({"type": "object"}, {}),
        ({}, None),
        (True, None),
        ({"description": "anything"}, None),
        ({"type": "string", "default": "hi"}, "hi"),
        ({"type": "string", "examples": ["e2e4", "d2d4"]}, "e2e4"),
        ({"type": "string", "example": "x1"}, "x1"),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 7}, 7),
        ({"type": "string", "const": "move", "default": "other"}, "move"),
        ({"type": "integer", "minimum": 3}, 3),
        ({"type": "integer", "maximum": -2}, -2),
        ({"type": "integer", "exclusiveMaximum": -2.5}, -3),
        ({"type": "number", "exclusiveMaximum": -2}, -3.0),
        ({"type": "number", "minimum": -5, "exclusiveMaximum": -2}, -3.5),
        ({"type": "integer", "minimum": 1.5}, 2),
        ({"type": "integer", "exclusiveMinimum": 3}, 4),
        ({"type": "number", "exclusiveMinimum": 0}, 1.0),
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, 0.5),
        ({"type": "integer", "minimum": 5, "multipleOf": 4}, 8),
        ({"type": "number", "minimum": -1, "maximum": 1}, 0.0),
        ({"type": "string", "minLength": 3}, "xxx"),
        ({"type": "string", "maxLength": 4}, ""),
        ({"type": "string", "pattern": "^[a-z]*$"}, ""),
        ({"type": "string", "pattern": "^x+$", "minLength": 2}, "xx"),
        ({"type": "string", "format": "date-time"}, "1970-01-01T00:00:00Z"),
        ({"type": "string", "format": "uuid"}, "00000000-0000-0000-0000-000000000000"),
        ({"type": "string", "format": "ipv4"}, "127.0.0.1"),
        ({"type": ["string", "null"]}, ""),
        ({"type": ["null", "string"]}, None),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [0, 0]),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}, [0, ""]),
        ({"type": "array", "items": [{"type": "boolean"}, {"const": "k"}]}, [False, "k"]),
        ({"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"a": 0}),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}, {}),
        ({"type": "object", "required": ["x"]}, {"x": None}),
        ({"type": "object", "required": ["x"], "additionalProperties": {"type": "integer"}}, {"x": 0}),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, 0),
        ({"oneOf": [{"type": "string", "pattern": "^a$"}, {"type": "integer"}]}, 0),
        ({"allOf": [{"type": "integer", "minimum": 2}]}, 2),
    ],
)
def test_shapes(schema: Any, expected: Any) -> None:
    value = default_value(schema)
    assert value == expected
    assert type(value) is type(expected)


def test_nested_objects_refs_and_all_of() -> None:
    schema = {
        "$defs": {
            "Point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
            "Named": {
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1}},
                "required": ["name"],
            },
        },
        "type": "object",
        "properties": {
            "at": {"$ref": "#/$defs/Point"},
            "with_default": {"$ref": "#/$defs/Point", "default": {"x": 5}},
            "both": {"allOf": [{"$ref": "#/$defs/Point"}, {"$ref": "#/$defs/Named"}]},
            "old": {"$ref": "#/definitions/Flag"},
            "optional": {"$ref": "#/$defs/Point"},
        },
        "definitions": {"Flag": {"type": "boolean"}},
        "required": ["at", "with_default", "both", "old"],
    }
    assert default_value(schema) == {
        "at": {"x": 0},
        "with_default": {"x": 5},
        "both": {"x": 0, "name": "x"},
        "old": False,
    }


def test_ref_against_a_separate_root() -> None:
    root = {"$defs": {"Dir": {"enum": ["up", "down"]}}}
    assert default_value({"$ref": "#/$defs/Dir"}, root) == "up"


def test_discriminator_sets_the_tag_even_when_it_is_not_required() -> None:
    schema = {
        "$defs": {
            "A": {"type": "object", "properties": {"kind": {"type": "string", "default": "a"}}},
            "B": {"type": "object", "properties": {"kind": {"type": "string"}}},
        },
        "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}],
        "discriminator": {"propertyName": "kind", "mapping": {"a": "#/$defs/A", "b": "#/$defs/B"}},
    }
    assert default_value(schema) == {"kind": "a"}
    schema["oneOf"] = [{"$ref": "#/$defs/B"}]
    assert default_value(schema) == {"kind": "b"}  # no const/default in B: the mapping key


def test_union_skips_branches_that_cannot_be_built() -> None:
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"code": {"type": "string", "pattern": "^[0-9]{4}$"}},
                "required": ["code"],
            },
            {"type": "object", "properties": {"skip": {"const": True}}, "required": ["skip"]},
        ]
    }
    assert default_value(schema) == {"skip": True}


# -- what cannot be built ----------------------------------------------------------


def test_no_default_names_every_field_with_a_placeholder_example() -> None:
    schema = {
        "type": "object",
        "properties": {
            "move": {"type": "string", "pattern": "^[a-h][1-8]$"},
            "n": {"type": "integer", "minimum": 5, "maximum": 3},
            "inner": {
                "type": "object",
                "properties": {"code": {"type": "string", "minLength": 5, "maxLength": 2}},
                "required": ["code"],
            },
            "fine": {"type": "integer"},
        },
        "required": ["move", "n", "inner", "fine"],
    }
    with pytest.raises(NoDefault) as info:
        default_value(schema)
    exc = info.value
    assert set(exc.needs) == {"move", "n", "inner.code"}
    assert exc.needs["move"] == "a string matching ^[a-h][1-8]$"
    assert exc.needs["n"] == "an integer >= 5 and <= 3"
    assert exc.example == {
        "move": "<a string matching ^[a-h][1-8]$>",
        "n": "<an integer >= 5 and <= 3>",
        "inner": {"code": "<a string of length 5..2>"},
        "fine": 0,
    }
    assert "move" in str(exc) and "inner.code" in str(exc)


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        (False, ""),
        ({"type": "object", "properties": {"x": False}, "required": ["x"]}, "x"),
        ({"type": "array", "items": {"type": "string", "pattern": "^z$"}, "minItems": 1}, "[0]"),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True}, ""),
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}, "required": ["x"]}, "x"),
        ({"type": "object", "properties": {"x": {"$ref": "other.json#/X"}}, "required": ["x"]}, "x"),
        ({"type": "string", "pattern": "("}, ""),
        ({"type": "weird"}, ""),
    ],
)
def test_unbuildable(schema: Any, path: str) -> None:
    with pytest.raises(NoDefault) as info:
        default_value(schema)
    assert list(info.value.needs) == [path]


def test_required_recursion_is_reported_not_looped() -> None:
    schema: dict[str, Any] = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "child": {"$ref": "#/$defs/Node"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
                "required": ["child"],
            }
        },
        "$ref": "#/$defs/Node",
    }
    with pytest.raises(NoDefault) as info:
        default_value(schema)
    assert info.value.needs == {"child": "a value (recursive Node)"}
    # optional recursion is fine: the null branch is taken
    schema["$defs"]["Node"]["required"] = ["next"]
    assert default_value(schema) == {"next": None}


# -- the pydantic schemas OpenEnv environments publish -------------------------------


class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Move(BaseModel):
    kind: Literal["move"] = "move"
    x: int = Field(ge=1, le=8)
    y: float = Field(gt=0)


class Say(BaseModel):
    kind: Literal["say"]
    text: str = Field(min_length=3)


class Inner(BaseModel):
    flag: bool
    tags: list[str] = Field(default_factory=list)


class BigAction(Action):
    command: Annotated[Say | Move, Field(discriminator="kind")]
    color: Color
    when: datetime.datetime
    ident: uuid.UUID
    maybe: int | None
    optional: int | None = None
    pair: tuple[int, str]
    moves: list[Move] = Field(min_length=2)
    inner: Inner
    scores: dict[str, float]
    mode: Literal["fast", "slow"]


class ToolCall(Action):
    type: Literal["call_tool"] = "call_tool"
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ListTools(Action):
    type: Literal["list_tools"] = "list_tools"


class Envelope(BaseModel):
    action: Annotated[ListTools | ToolCall, Field(discriminator="type")]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (Action, {}),
        (EchoAction, {"message": ""}),
        (CounterAction, {"delta": 0}),
        (WalkAction, {"direction": "right"}),
        (Move, {"x": 1, "y": 1.0}),
        (Say, {"kind": "say", "text": "xxx"}),
        (Envelope, {"action": {"type": "list_tools"}}),
    ],
)
def test_pydantic_models(model: type[BaseModel], expected: dict[str, Any]) -> None:
    value = default_value(model.model_json_schema())
    assert value == expected
    model.model_validate(value)


def test_a_big_pydantic_action_validates() -> None:
    value = default_value(BigAction.model_json_schema())
    assert value["command"] == {"kind": "say", "text": "xxx"}  # the first branch, tag set
    assert value["color"] == "red"
    assert value["mode"] == "fast"
    assert "optional" not in value and "metadata" not in value
    assert value["maybe"] == 0
    assert len(value["moves"]) == 2
    parsed = BigAction.model_validate(value)
    assert parsed.when.year == 1970 and parsed.inner.flag is False


def test_pydantic_pattern_field_cannot_be_built() -> None:
    with pytest.raises(NoDefault) as info:
        default_value(ChessAction.model_json_schema())
    assert list(info.value.needs) == ["move"]
    assert info.value.example == {"move": "<a string matching ^[a-h][1-8][a-h][1-8]$>"}


def test_tool_input_schemas() -> None:
    from openenv.server import EnvServer
    from openenv.sync import Env

    with EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0) as server, Env(server.url) as env:
        env.reset()
        tools = {t.name: t for t in env.list_tools()}
    assert default_value(tools["add"].input_schema) == {"a": 0, "b": 0}
    assert default_value(tools["greet"].input_schema) == {"name": ""}


# -- descriptions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({}, "any"),
        ({"type": "integer", "maximum": 100}, "integer (<= 100)"),
        ({"type": "integer", "minimum": 1, "maximum": 8}, "integer (>= 1 and <= 8)"),
        ({"enum": ["a", "b"]}, '"a" | "b"'),
        ({"const": "x"}, '"x"'),
        ({"$ref": "#/$defs/Move"}, "Move"),
        ({"anyOf": [{"$ref": "#/$defs/Move"}, {"type": "null"}]}, "Move | null"),
        ({"type": "array", "items": {"$ref": "#/$defs/Move"}, "minItems": 2}, "list[Move] (min items 2)"),
        (
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2},
            "tuple[integer, string]",
        ),
        ({"type": "object", "additionalProperties": {"type": "number"}}, "dict[string, number]"),
        ({"type": "object", "title": "Inner", "properties": {}}, "Inner"),
        ({"type": "string", "pattern": "^a$", "minLength": 1}, "string (min length 1, matching '^a$')"),
        ({"type": "string", "format": "date-time"}, "string (format date-time)"),
        ({"type": ["string", "null"]}, "string | null"),
    ],
)
def test_describe_type(schema: dict[str, Any], text: str) -> None:
    assert describe_type(schema) == text


def test_describe_fields_required_first_with_defaults() -> None:
    fields = describe_fields(CounterAction.model_json_schema())
    assert [f.name for f in fields] == ["delta", "metadata", "sleep", "size"]
    delta, metadata, sleep, _ = fields
    assert delta.required and delta.type == "integer (<= 100)" and delta.default is MISSING
    assert not metadata.required and metadata.default is MISSING
    assert sleep.default == 0.0
    chess = describe_fields(ChessAction.model_json_schema())
    assert chess[0].description == "from and to squares, e.g. e2e4"
    assert describe_fields({"$ref": "#/$defs/M", "$defs": {"M": {"properties": {"a": {}}}}})[0].name == "a"
    assert describe_fields({"type": "string"}) == []
