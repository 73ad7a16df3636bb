"""`Session`'s frames without a socket: the ``step`` hot path answers as the general path does.

A plain ``step`` frame skips the frame generator (`Session._step_action`,
``_step_sync``/``_step_aware``); every reply it can give is pinned here, for both
drivers (`Session.handle()` off the loop, `Session.handle_async()` on it), with
the strict-JSON encoder it uses (`openenv.server._wire.dumps`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import Field, ValidationError

from openenv.server import Environment, Observation, State, _wire, tool
from openenv.server.echo import EchoAction, EchoEnvironment
from openenv.server.protocol import EnvProtocol

Driver = Callable[[Any, str], tuple[Any, bool]]


def _sync(session: Any, raw: str) -> tuple[Any, bool]:
    return session.handle(raw)  # type: ignore[no-any-return]


def _async(session: Any, raw: str) -> tuple[Any, bool]:
    return asyncio.run(session.handle_async(raw))  # type: ignore[no-any-return]


DRIVERS = [pytest.param(_sync, id="handle"), pytest.param(_async, id="handle_async")]


def _session(factory: Any) -> Any:
    session, error = EnvProtocol(factory).open_session()
    assert error is None and session is not None
    return session


def _step(message: Any) -> str:
    return json.dumps({"type": "step", "data": message})


def _error(reply: str) -> dict[str, Any]:
    frame = json.loads(reply)
    assert frame["type"] == "error"
    return frame["data"]  # type: ignore[no-any-return]


class Flaky(Environment[EchoAction, Observation, State]):
    """Each step does what its message says."""

    action_type = EchoAction
    blocking = False

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: EchoAction) -> Any:
        what = action.message
        if what == "raise":
            raise RuntimeError("the step broke")
        if what == "invalid":
            EchoAction.model_validate({})
        if what == "nan":
            return Observation(reward=math.nan)
        if what == "none":
            return None
        if what == "dict":
            return {"done": True, "reward": 2.0, "metadata": {"k": [1, "é"]}, "extra": None}
        return Observation(reward=1.5, metadata={"said": what})

    @property
    def state(self) -> State:
        return State()

    @tool
    def ping(self) -> str:
        """Answers pong."""
        return "pong"


@pytest.mark.parametrize("drive", DRIVERS)
def test_an_echo_step_frame_is_byte_for_byte_the_reference_frame(drive: Driver) -> None:
    session = _session(EchoEnvironment)
    drive(session, '{"type":"reset"}')
    reply, keep = drive(session, _step({"message": "héllo"}))
    assert keep is True
    expected = {
        "type": "observation",
        "data": {
            "observation": {"metadata": {"step": 1}, "echoed_message": "héllo", "message_length": 5},
            "reward": 0.5,
            "done": False,
            "metadata": {"step": 1},
        },
    }
    assert reply == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("drive", DRIVERS)
def test_an_invalid_action_gets_pydantics_errors_and_the_session_stays_open(drive: Driver) -> None:
    session = _session(EchoEnvironment)
    reply, keep = drive(session, _step({"message": 3}))
    assert keep is True
    with pytest.raises(ValidationError) as caught:
        EchoAction.model_validate({"message": 3})
    data = _error(reply)
    assert data["code"] == "VALIDATION_ERROR" and data["message"] == "Invalid message"
    assert data["errors"] == json.loads(json.dumps(caught.value.errors(include_url=False)))


@pytest.mark.parametrize("drive", DRIVERS)
def test_what_a_step_raises_or_returns_becomes_the_same_error_frames(
    drive: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    session = _session(Flaky)
    with caplog.at_level(logging.INFO, logger="openenv.server"):
        raised = _error(drive(session, _step({"message": "raise"}))[0])
    assert raised == {"message": "the step broke", "code": "EXECUTION_ERROR"}
    assert [r.getMessage() for r in caplog.records] == ["step raised"]
    assert _error(drive(session, _step({"message": "invalid"}))[0])["code"] == "VALIDATION_ERROR"
    nan = _error(drive(session, _step({"message": "nan"}))[0])
    assert nan["code"] == "EXECUTION_ERROR"
    assert nan["message"].startswith("the environment's observation cannot be sent as strict JSON: Out of range")
    assert _error(drive(session, _step({"message": "none"}))[0]) == {
        "message": "environment returned NoneType, not an Observation",
        "code": "EXECUTION_ERROR",
    }
    mapping, keep = drive(session, _step({"message": "dict"}))
    assert keep is True
    assert json.loads(mapping)["data"] == {
        "observation": {"metadata": {"k": [1, "é"]}, "extra": None},
        "reward": 2.0,
        "done": True,
        "metadata": {"k": [1, "é"]},
    }


@pytest.mark.parametrize("drive", DRIVERS)
def test_frames_off_the_hot_path_keep_their_answers(drive: Driver) -> None:
    session = _session(Flaky)
    extra = _error(drive(session, '{"type":"step","data":{"message":"x"},"id":1}')[0])
    assert extra["code"] == "VALIDATION_ERROR" and extra["errors"][0]["type"] == "extra_forbidden"
    missing = _error(drive(session, '{"type":"step"}')[0])
    assert missing["code"] == "VALIDATION_ERROR" and missing["errors"][0]["loc"] == ["data"]
    assert _error(drive(session, '{"type":"step","data":[1]}')[0])["code"] == "VALIDATION_ERROR"
    assert _error(drive(session, "[1")[0])["code"] == "INVALID_JSON"
    assert _error(drive(session, '"step"')[0])["code"] == "VALIDATION_ERROR"
    # an MCP action through the step loop is not validated as the environment's action
    tools, keep = drive(session, _step({"type": "list_tools"}))
    assert keep is True and json.loads(tools)["type"] == "observation"
    assert "ping" in tools
    assert drive(session, '{"type":"close"}') == (None, False)


class Both(Environment[EchoAction, Observation, State]):
    """A sync ``step`` and OpenEnv's ``step_async``, each saying which one ran."""

    action_type = EchoAction

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: EchoAction) -> Observation:
        return Observation(metadata={"by": "step"})

    async def step_async(self, action: EchoAction) -> Observation:
        await asyncio.sleep(0)
        return Observation(metadata={"by": "step_async"})

    @property
    def state(self) -> State:
        return State()


def _by(reply: str) -> str:
    return json.loads(reply)["data"]["metadata"]["by"]  # type: ignore[no-any-return]


def test_on_the_loop_step_async_is_awaited_and_off_it_step_is_called() -> None:
    session = _session(Both)
    assert _by(_async(session, _step({"message": "a"}))[0]) == "step_async"
    assert _by(_sync(session, _step({"message": "a"}))[0]) == "step"


def test_a_step_async_swapped_on_the_instance_is_followed() -> None:
    session = _session(Both)
    assert _by(_async(session, _step({"message": "a"}))[0]) == "step_async"

    def plain(action: EchoAction) -> Observation:  # not a coroutine function: step() runs instead
        return Observation(metadata={"by": "plain"})

    session.env.step_async = plain
    assert _by(_async(session, _step({"message": "a"}))[0]) == "step"

    async def other(action: EchoAction) -> Observation:
        return Observation(metadata={"by": "other"})

    session.env.step_async = other
    assert _by(_async(session, _step({"message": "a"}))[0]) == "other"


class AsyncStep(Both):
    """``async def step``, no ``step_async``."""

    step_async = None  # type: ignore[assignment]

    async def step(self, action: EchoAction) -> Observation:  # type: ignore[override]
        await asyncio.sleep(0)
        return Observation(metadata={"by": "async step"})


@pytest.mark.parametrize("drive", DRIVERS)
def test_an_async_step_runs_in_both_drivers(drive: Driver) -> None:
    assert _by(drive(_session(AsyncStep), _step({"message": "a"}))[0]) == "async step"


class Aliased(Observation):
    value: int = Field(alias="Value")


class Custom(Observation):
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {"custom": True, "reward": 9.0, "done": False}


def test_the_step_result_is_model_dump_with_its_defaults() -> None:
    assert _wire.step_result(Aliased(Value=3))["observation"] == {"metadata": {}, "value": 3}
    assert _wire.step_result(Custom()) == {"observation": {"custom": True}, "reward": 9.0, "done": False}


class Loop(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, "é", None, True], "b": {"c": 1e16, "d": -0.0, "e": 10**30}},
        {"s": "\ud800 lone", "t": "\u2028", 1: "int key", 2.5: "float key"},
        {"nested": Loop(x=1), "tuple": (1, 2)},
    ],
)
def test_dumps_is_strict_json_dumps(value: dict[Any, Any]) -> None:
    reference = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert _wire.dumps(value) == reference


def test_dumps_raises_the_reference_encoders_errors() -> None:
    for bad in ({"x": math.nan}, {"x": [math.inf]}):
        with pytest.raises(ValueError) as ours:
            _wire.dumps(bad)
        with pytest.raises(ValueError) as reference:
            json.dumps(bad, allow_nan=False)
        assert str(ours.value) == str(reference.value)
    circular: dict[str, Any] = {}
    circular["me"] = circular
    with pytest.raises(ValueError, match="Circular reference detected"):
        _wire.dumps(circular)
    with pytest.raises((TypeError, ValueError)):  # pydantic-core's serialisation error
        _wire.dumps({"x": object()})


def test_a_frame_without_a_type_is_an_unknown_type_not_a_step() -> None:
    session = _session(EchoEnvironment)
    reply, keep = _sync(session, '{"data":{"message":"x"},"kind":"step"}')
    assert keep is True
    assert _error(reply) == {"message": "Unknown message type: ", "code": "UNKNOWN_TYPE"}
