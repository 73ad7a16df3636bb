# GENERATED from tests/_async/test_codec.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Codecs over real sockets: parse failures keep the session, actions are checked first, adopted clients."""

from __future__ import annotations

from typing import Any, Literal

import pydantic
import pytest

from openenv.sync import (
    Codec,
    Env,
    InvalidAction,
    InvalidActionType,
    Observation,
    ParseError,
    ServerProvider,
    State,
)

from ..envs import CounterAction, CounterClient, CounterObservation, CounterState


class Elsewhere(Observation):
    """An observation the counter never sends."""

    position: int


class Say(pydantic.BaseModel):
    type: Literal["say"] = "say"
    text: str


class Strict(State):
    model_config = pydantic.ConfigDict(extra="forbid")


class Existing(ServerProvider):
    """A provider for a server that is already running (stops nothing)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stopped = False

    def start(self) -> str:
        return self.url

    def stop(self) -> None:
        self.stopped = True


def test_parse_errors_keep_the_result_and_the_session(counter_server: Any) -> None:
    with Env(counter_server.url, codec=Codec(observation=Elsewhere, state=Strict)) as env:
        with pytest.raises(ParseError) as reset_info:
            env.reset(start=1)
        assert reset_info.value.payload["observation"]["count"] == 1
        with pytest.raises(ParseError) as info:
            env.step({"delta": 2})
        assert info.value.kind == "observation"
        assert (info.value.payload["observation"]["count"], info.value.payload["reward"]) == (3, 2)
        assert env.connected  # not a broken protocol: the connection stays
        with pytest.raises(ParseError) as state_info:
            env.state()
        assert state_info.value.kind == "state"
        assert (state_info.value.payload["step_count"], state_info.value.payload["total"]) == (1, 3)
        with pytest.raises(ParseError) as again:  # the session is in step with the server
            env.step({"delta": 1})
        assert again.value.payload["observation"]["count"] == 4


def test_invalid_actions_are_refused_before_sending(counter_server: Any) -> None:
    codec: Codec[Any, Any, Any] = Codec(action=CounterAction, state=CounterState)
    with Env(counter_server.url, codec=codec) as env:
        env.reset()
        with pytest.raises(InvalidAction) as info:
            env.step({"delta": 1000})
        assert info.value.errors[0]["loc"] == ("delta",)
        with pytest.raises(InvalidActionType):
            env.step(State())
        with pytest.raises(InvalidActionType):
            env.step([1])
        assert (env.state()).step_count == 0
    with Env(counter_server.url) as plain:
        plain.reset()
        with pytest.raises(InvalidActionType):
            plain.step({"delta": 1, "tags": {1, 2}})
        with pytest.raises(InvalidAction):
            plain.step({"delta": float("nan")})
        assert (plain.state())["step_count"] == 0


def test_union_codec(counter_server: Any) -> None:
    codec: Codec[Any, Any, Any] = Codec(action=CounterAction | Say, observation=[Elsewhere, CounterObservation])
    with Env(counter_server.url, codec=codec) as env:
        env.reset()
        result = env.step(CounterAction(delta=2))
        assert isinstance(result.observation, CounterObservation) and result.observation.count == 2
        result = env.step({"delta": 1})
        assert result.observation.count == 3


def test_adopted_openenv_client(counter_server: Any) -> None:
    adopted: Env[Any, Any, Any] = Env(counter_server.url, codec=CounterClient)
    with adopted as env:
        reset = env.reset(start=2)
        assert isinstance(reset.observation, CounterObservation) and reset.observation.count == 2
        result = env.step(CounterAction(delta=3))
        assert (result.observation.count, result.reward, result.done, result.metadata) == (5, 3.0, False, {"step": 1})
        state = env.state()
        assert isinstance(state, CounterState) and (state.step_count, state.total) == (1, 5)
    with Env(counter_server.url, codec=Codec.from_client(CounterClient)) as env:
        assert (env.reset()).observation.count == 0


def test_schema_codec_with_every_constructor(counter_server: Any) -> None:
    with pytest.raises(TypeError, match="from_schema"):
        Env(counter_server.url, codec="schema")  # type: ignore[arg-type]
    env: Env[Any, Any, Any] = Env.from_env(counter_server.url, codec="schema")
    with env:
        assert env.codec.action_type.__name__ == "CounterAction"
        assert (env.reset(start=1)).observation.count == 1
    provider = Existing(counter_server.url)
    env = Env.from_provider(provider, codec="schema")
    with env:
        assert (env.step({"delta": 2})).observation.count == 2
    assert provider.stopped
    with Env.from_schema(counter_server.url, message_timeout=5.0) as env:
        assert (env.state()).step_count == 0


class HookedEnv(Env[Any, Any, Any]):
    """OpenEnv's way: a subclass overriding the hook; it parses resets too."""

    def _parse_result(self, payload: dict[str, Any]) -> Any:
        result = super()._parse_result(payload)
        result.observation = ("hooked", result.observation["count"])
        return result


def test_subclass_hooks_parse_resets(counter_server: Any) -> None:
    with HookedEnv(counter_server.url) as env:
        assert (env.reset(start=4)).observation == ("hooked", 4)
        assert (env.step({"delta": 1})).observation == ("hooked", 5)
