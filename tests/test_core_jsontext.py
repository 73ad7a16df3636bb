"""`openenv._core.jsontext`: the same text, values and errors as the standard library's calls, both ends of the wire."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openenv._core import frames, jsontext

from .test_properties import json_values

# the property tests' JSON values, and objects with the keys json.dumps coerces (ints, bools)
_values = json_values | st.dictionaries(st.integers() | st.booleans(), json_values, max_size=3)


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "value", call(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _reference(allow_nan: bool) -> Any:
    return json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan).encode


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=6), _values, max_size=5) | _values, allow_nan=st.booleans())
def test_the_encoder_writes_the_reference_text_or_raises_its_error(value: Any, allow_nan: bool) -> None:
    ours = _outcome(jsontext.encoder(allow_nan=allow_nan), value)
    assert ours == _outcome(_reference(allow_nan), value)


class Loop(dict):  # type: ignore[type-arg]
    pass


class Number(float):
    def __repr__(self) -> str:  # the C encoder ignores it, as the reference does
        return "not a number"


def test_the_encoder_handles_what_the_fast_path_cannot_as_the_reference_does() -> None:
    dumps, reference = jsontext.encoder(allow_nan=False), _reference(False)
    circular: dict[str, Any] = {}
    circular["me"] = circular
    with pytest.raises(ValueError, match="Circular reference detected"):
        dumps(circular)
    # after a failure the next call is unaffected (the fast encoder keeps no state between calls)
    assert dumps({"me": 1}) == '{"me":1}'
    for value in (
        {"x": math.nan},
        {"x": object()},
        {1.5: "float key", None: "none key", True: "bool key"},
        {"sub": Loop(a=Number(1.5)), "tuple": (1, 2), "s": "\ud800 lone \u2028"},
        Loop(a=1),
        [{"a": 1}],
        "text",
    ):
        assert _outcome(dumps, value) == _outcome(reference, value)
    with_default = jsontext.encoder(default=lambda obj: sorted(obj))
    assert with_default({"set": {3, 1, 2}}) == '{"set":[1,2,3]}'


_texts = st.one_of(
    _values.map(json.dumps),
    st.tuples(
        st.sampled_from(["", " ", "\n", "\t "]), _values.map(json.dumps), st.sampled_from(["", " ", "x", "1"])
    ).map("".join),
    st.text(max_size=20),
    st.sampled_from(["", "NaN", "-Infinity", '{"a":1}{"b":2}', '{"a":', "[1,]", '"\\ud800"', "1" * 4400]),
)


@settings(max_examples=400, deadline=None)
@given(text=_texts)
def test_loads_reads_the_reference_value_or_raises_its_error(text: str) -> None:
    ours, reference = _outcome(jsontext.loads, text), _outcome(json.loads, text)
    if ours[0] == "value" and reference[0] == "value":
        assert json.dumps(ours[1]) == json.dumps(reference[1])  # NaN != NaN: compare the texts
    else:
        assert ours == reference


def test_loads_takes_bytes_and_deep_nesting_as_the_reference_does() -> None:
    assert jsontext.loads(b'{"a": [1]}') == {"a": [1]}
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        jsontext.loads(deep)


def test_the_client_frames_go_through_it() -> None:
    reply = '{"type":"observation","data":{"observation":{"n":1},"reward":1.5,"done":false}}'
    assert frames.decode_reply(reply, frames.OBSERVATION) == json.loads(reply)["data"]
    assert frames.decode_reply(" " + reply + "\n", frames.OBSERVATION) == json.loads(reply)["data"]
    with pytest.raises(Exception, match="not JSON"):
        frames.decode_reply(reply + "{}", frames.OBSERVATION)
    assert frames.encode_step({"message": "é"}) == '{"type":"step","data":{"message":"é"}}'
