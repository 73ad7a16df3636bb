"""Environments for the RELEASED OpenEnv servers (``openenv`` 0.10.0, ``openenv-core`` 0.3.0).

This module is imported only inside the released packages' own virtualenvs
(by uvicorn, ``--app-dir`` this folder); never in our test process.  It is
written against their server API (``openenv.core.env_server``), which is the
same in both releases for what is used here.  Apps (``released_apps:<name>``):

* ``echo_app``     echo-style env, generic ``Action`` subclass with ``message``;
* ``counter_app``  typed Action/Observation/State (``delta <= 100``; ``delta == 99``
                   raises; ``reset(start=...)``; extra state field ``total``);
* ``tools_app``    an ``MCPEnvironment`` with FastMCP tools ``add``, ``greet``, ``fail``.

Capacity: ``$MAX_CONCURRENT_ENVS`` (default 2).
"""

from __future__ import annotations

import inspect
import os
import uuid
from typing import Any

from fastmcp import FastMCP
from pydantic import Field

from openenv.core.env_server import Action, Environment, Observation, State, create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment

CAPACITY = int(os.environ.get("MAX_CONCURRENT_ENVS", "2"))


def _app(env: Any, action: Any, observation: Any, state: Any = None) -> Any:
    kwargs: dict[str, Any] = {"max_concurrent_envs": CAPACITY}
    if state is not None and "state_cls" in inspect.signature(create_app).parameters:
        kwargs["state_cls"] = state  # 0.10 only: declared state class for /state and /schema
    return create_app(env, action, observation, **kwargs)


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="Echo environment ready!", message_length=0, reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:  # type: ignore[override]
        self._state.step_count += 1
        n = len(action.message)
        return EchoObservation(
            echoed_message=action.message, message_length=n, reward=n * 0.1, metadata={"step": self._state.step_count}
        )

    @property
    def state(self) -> State:
        return self._state


class CounterAction(Action):
    delta: int = Field(le=100)


class CounterObservation(Observation):
    count: int = 0
    note: str = ""


class CounterState(State):
    total: int = 0


class CounterEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = CounterState()
        self._count = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, start: int = 0) -> CounterObservation:  # type: ignore[override]
        self._state = CounterState(episode_id=episode_id or "ep", step_count=0, total=start)
        self._count = start
        return CounterObservation(count=start, note=f"seed={seed}", metadata={"reset": True})

    def step(self, action: CounterAction, timeout_s: float | None = None, **kwargs: Any) -> CounterObservation:  # type: ignore[override]
        if action.delta == 99:
            raise RuntimeError("boom: delta 99 is cursed")
        self._count += action.delta
        self._state.step_count += 1
        self._state.total = self._count
        meta = {"step": self._state.step_count} if action.delta else {}
        return CounterObservation(count=self._count, reward=action.delta, done=self._count >= 10, metadata=meta)

    @property
    def state(self) -> CounterState:
        return self._state


class ToolsEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("tools")

        @mcp.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @mcp.tool()
        def greet(name: str, punctuation: str = "!") -> str:
            """Greet someone by name."""
            return f"Hello, {name}{punctuation}"

        @mcp.tool()
        def fail(message: str) -> None:
            """Always raises."""
            raise RuntimeError(message)

        super().__init__(mcp)
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(done=False, reward=None, metadata={"reset": True})

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        return Observation(metadata={"step": self._state.step_count})

    @property
    def state(self) -> State:
        return self._state


echo_app = _app(EchoEnv, EchoAction, EchoObservation)
counter_app = _app(CounterEnv, CounterAction, CounterObservation, CounterState)
try:
    from openenv.core.env_server.mcp_types import (
        CallToolAction,
        CallToolObservation,  # noqa: F401
    )
except ImportError:  # pragma: no cover
    CallToolAction = Action  # type: ignore[misc,assignment]
tools_app = _app(ToolsEnv, CallToolAction, Observation)
