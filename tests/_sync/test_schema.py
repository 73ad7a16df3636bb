# GENERATED from tests/_async/test_schema.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Typed clients built from ``GET /schema`` (written once, generated for the sync twin)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from openenv.sync import ConnectError, Env, ExecutionError, InvalidAction


def test_from_schema_types_the_client(counter_server: Any) -> None:
    env = Env.from_schema(counter_server.url)
    try:
        codec = env.codec
        assert codec.action_type is not None and codec.action_type.__name__ == "CounterAction"
        result = env.reset(start=2)
        assert isinstance(result.observation, pydantic.BaseModel)
        assert result.observation.count == 2  # type: ignore[attr-defined]
        result = env.step({"delta": 3})
        assert result.observation.count == 5
        assert result.reward == 3.0
        result = env.step(codec.action_type(delta=1))
        assert result.observation.count == 6
        state = env.state()
        assert (state.step_count, state.total) == (2, 6)
    finally:
        env.close()


def test_from_schema_validates_before_sending(counter_server: Any) -> None:
    with Env.from_schema(counter_server.url) as env:
        env.reset()
        with pytest.raises(InvalidAction):
            env.step({"delta": 1000})
        with pytest.raises(InvalidAction):
            env.step({"delta": 1, "bogus": 1})
        with pytest.raises(ExecutionError):
            env.step({"delta": 99})
        assert (env.state()).step_count == 0


def test_from_schema_unreachable(free_port: int) -> None:
    with pytest.raises(ConnectError):
        Env.from_schema(f"http://127.0.0.1:{free_port}", connect_timeout=2.0)
