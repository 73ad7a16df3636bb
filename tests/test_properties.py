"""Property-based tests of the sans-IO core: for any input, only ``OpenEnvError`` subclasses escape.

Covers frame decoding (``_core/frames.py``), URL rules (``_core/urls.py``), codecs
(``_core/codec.py``) and models built from JSON Schemas (``_core/schema.py``,
``Codec.from_schema``). Example counts are modest so the suite stays fast;
``HYPOTHESIS_PROFILE=thorough`` runs many more.
"""

from __future__ import annotations

import json
import os
import string
from typing import Any
from urllib.parse import urlsplit

import pydantic
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from openenv._core import frames
from openenv._core.codec import Codec
from openenv._core.errors import (
    InvalidAction,
    InvalidURL,
    OpenEnvError,
    ParseError,
    ProtocolError,
    ServerError,
    error_from_frame,
)
from openenv._core.result import StepResult
from openenv._core.urls import (
    Endpoints,
    is_local_host,
    parse_base_url,
    redact_url,
    space_image,
    space_subdomain,
    space_url,
)
from openenv.server.echo import EchoAction, EchoObservation, EchoState

settings.register_profile(
    "openenv", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False
)
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "openenv"))

# ------------------------------------------------------------------ strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
frame_types = st.sampled_from(["observation", "state", "mcp", "error", "reset", "", "OBSERVATION"])


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True, ensure_ascii=False)


@st.composite
def frames_as_text(draw: st.DrawFn) -> str | bytes:
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return draw(st.text(max_size=60))
    if kind == 1:
        return draw(st.binary(max_size=60))
    if kind == 2:
        return _dumps(draw(json_values))
    if kind == 3:
        depth = draw(st.integers(1, 5000))
        return "[" * depth + "]" * draw(st.integers(0, depth))
    if kind == 4:
        return '{"type":"observation","data":' + "1" * draw(st.integers(1, 6000)) + "}"
    data: Any = draw(json_objects | json_values)
    if kind == 5:
        data = {
            "observation": draw(json_values | json_objects),
            "reward": draw(json_values),
            "done": draw(json_values),
            "metadata": draw(json_values),
        }
    return _dumps({"type": draw(frame_types), "data": data})


# ------------------------------------------------------------------ frames


@given(frames_as_text(), st.sampled_from([frames.OBSERVATION, frames.STATE, frames.MCP]))
def test_decode_reply_raises_only_openenv_errors(raw: str | bytes, expected: str) -> None:
    try:
        data = frames.decode_reply(raw, expected)
    except OpenEnvError:
        return
    assert type(data) is dict
    if expected == frames.OBSERVATION:
        try:
            result = frames.parse_step_result(data)
        except ProtocolError:
            return
        assert isinstance(result, StepResult)
        assert result.reward is None or isinstance(result.reward, float)
        assert type(result.done) is bool and type(result.metadata) is dict


@given(json_values)
def test_error_from_frame_always_builds_a_server_error(data: Any) -> None:
    error = error_from_frame(data)
    assert isinstance(error, ServerError)
    str(error)
    repr(error)


@given(json_objects)
def test_encoded_frames_round_trip(payload: dict[str, Any]) -> None:
    for encode, kind in ((frames.encode_step, "step"), (frames.encode_reset, "reset"), (frames.encode_mcp, "mcp")):
        try:
            text = encode(payload)
        except InvalidAction:  # NaN / Infinity: strict JSON out, refused before sending
            assert "nan" in repr(payload).lower() or "inf" in repr(payload).lower()
            continue
        decoded = json.loads(text)
        assert decoded["type"] == kind
        assert json.dumps(decoded["data"], sort_keys=True) == json.dumps(payload, sort_keys=True)


# ------------------------------------------------------------------ URLs

url_parts = st.sampled_from(
    ["http://", "https://", "ws://", "wss://", "HTTP://", "ftp://", "", "//", "http:", "user:pw@", "[", "]", "::1"]
)
url_text = st.builds(
    lambda scheme, host, tail: scheme + host + tail,
    url_parts,
    st.text(max_size=20) | st.sampled_from(["127.0.0.1", "localhost", "[::1]", "example.com", "10.0.0.1"]),
    st.text(alphabet=string.printable + "é\u0000\ud800", max_size=20)
    | st.sampled_from([":8000", ":0", ":99999", ":-1", ":x", "/ws", "/a/ws/", "?q=1#f"]),
)


@given(url_text | st.text(max_size=40))
@example("ws")  # a host named ws: ws://ws/ws ends with "/ws/ws" and doubles nothing (its path is /ws)
def test_url_rules_raise_only_invalid_url(url: str) -> None:
    redacted = redact_url(url)
    assert isinstance(redacted, str)
    try:
        endpoints = parse_base_url(url)
    except InvalidURL as exc:
        assert "user:pw" not in str(exc)  # credentials never in messages
        return
    assert isinstance(endpoints, Endpoints)
    assert endpoints.ws_url.startswith(("ws://", "wss://"))
    assert endpoints.http_url.startswith(("http://", "https://"))
    assert not urlsplit(endpoints.ws_url).path.endswith("/ws/ws")  # the endpoint's path is never doubled
    assert isinstance(is_local_host(endpoints.host), bool)
    again = parse_base_url(endpoints.base_url)  # normalising is idempotent
    assert again.ws_url == endpoints.ws_url


@given(st.text(max_size=30) | st.builds(lambda a, b: f"{a}/{b}", st.text(max_size=10), st.text(max_size=10)))
def test_space_names_raise_only_invalid_url(repo_id: str) -> None:
    try:
        sub = space_subdomain(repo_id)
    except InvalidURL:
        return
    assert sub and set(sub) <= set(string.ascii_lowercase + string.digits + "-")
    assert space_url(repo_id).startswith("https://")
    assert space_image(repo_id).endswith(":latest")


@given(st.text(max_size=40))
def test_is_local_host_never_raises(host: str) -> None:
    assert isinstance(is_local_host(host), bool)


# ------------------------------------------------------------------ codecs

ECHO = Codec(action=EchoAction, observation=EchoObservation, state=EchoState)


@given(json_objects | st.fixed_dictionaries({"observation": json_objects, "reward": json_values, "done": json_values}))
def test_codecs_parse_replies_raising_only_protocol_errors(payload: dict[str, Any]) -> None:
    # ProtocolError: the reply breaks the protocol; ParseError: it does not match the codec's models
    for codec in (Codec(), ECHO):
        try:
            result = codec._parse_result(payload)
        except (ProtocolError, ParseError):
            pass
        else:
            assert isinstance(result, StepResult)
        try:
            codec._parse_state(payload)
        except (ProtocolError, ParseError):
            pass


# ------------------------------------------------------------------ JSON Schemas

schema_keys = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "$ref",
        "$defs",
        "definitions",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "items",
        "prefixItems",
        "additionalProperties",
        "default",
        "description",
        "title",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "format",
    ]
)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object", "bogus"])
refs = st.sampled_from(["#/$defs/A", "#/$defs/B", "#/definitions/A", "#/nope", "", "A"])
field_names = st.sampled_from(["a", "b", "model_dump", "class", "x-y", "", "type", "_p", "1x", "schema", "copy"])


def _schema_value(key: str, inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    if key == "type":
        return type_names | st.lists(type_names, max_size=3) | json_values
    if key == "properties" or key in ("$defs", "definitions"):
        names = field_names if key == "properties" else st.sampled_from(["A", "B", "C"])
        return st.dictionaries(names, inner, max_size=3) | json_values
    if key == "required":
        return st.lists(field_names, max_size=3) | json_values
    if key == "$ref":
        return refs | json_values
    if key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        return st.lists(inner, max_size=3) | json_values
    if key in ("items", "additionalProperties"):
        return inner | st.booleans()
    if key == "pattern":
        return st.sampled_from(["^a+$", "(", "[", "\\", "a{2,1}", ".*"]) | json_values
    return json_values


@st.composite
def _schema_node(draw: st.DrawFn, inner: st.SearchStrategy[Any]) -> dict[str, Any]:
    keys = draw(st.lists(schema_keys, max_size=4, unique=True))
    return {key: draw(_schema_value(key, inner)) for key in keys}


schemas: st.SearchStrategy[Any] = st.recursive(
    st.builds(dict) | st.booleans(), lambda inner: _schema_node(inner), max_leaves=12
)


@given(st.fixed_dictionaries({}, optional={"action": schemas, "observation": schemas, "state": schemas}), json_objects)
def test_codec_from_schema_raises_only_openenv_errors(schema: dict[str, Any], payload: dict[str, Any]) -> None:
    try:
        codec = Codec.from_schema(schema)
    except OpenEnvError:
        return
    try:
        sent = codec._step_payload(payload)
        frames.encode_step(sent)
    except InvalidAction:
        pass  # a bad action fails before anything is sent (pydantic's errors on .errors; NaN refused)
    else:
        assert type(sent) is dict
    for parse in (codec._parse_result, codec._parse_state):
        try:
            parse(payload)
        except (ProtocolError, ParseError):
            pass


@pytest.mark.parametrize(
    "schema",
    [
        {"action": {"properties": {"a": {"$ref": "#/$defs/Missing"}}}},
        {"action": {"properties": {"a": {"enum": [[1], {"x": 1}]}}}},
        {"action": {"properties": {"a": {"const": {"x": 1}}}}},
        {"action": {"properties": {"a": {"type": "string", "pattern": "("}}}},
        {"action": {"properties": {"a": {"type": "string", "minLength": "x"}}}},
        {"observation": {"properties": {"a": {"type": "integer", "minimum": "x"}}}},
        {"state": {"properties": {"a": {"type": "integer", "default": 1, "multipleOf": 0}}}},
    ],
)
def test_broken_schemas_raise_protocol_error(schema: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="JSON Schema"):
        codec = Codec.from_schema(schema)
        # some constraints are checked only when a value is validated
        for model in (codec.action_type, codec.observation_type, codec.state_type):
            if model is not None:
                try:
                    model.model_validate({"a": "x", "": 1})
                except pydantic.ValidationError:
                    pass
