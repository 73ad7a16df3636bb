"""A built-in tool environment: MCP tools ``add``, ``greet`` and ``fail``.

``python -m openenv serve openenv.server.tools_demo:ToolsDemoEnvironment``
serves it; ``python -m openenv run`` makes one tool call against it.  Its
ordinary ``step`` takes the base action (``{}`` or ``{"metadata": {...}}``) and
reports how many tool calls the session has made.  A ``call_tool`` made through
the step loop (a client's ``call_tool`` in simulation mode) counts as a step and
is scored: reward 1.0 when the tool answered, 0.0 when the call failed; the
episode never ends on its own (``done`` stays false).  One made with an ``mcp``
frame is neither counted nor scored.
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv._core.models import Action, Observation, State

from .environment import Environment
from .tools import CallToolAction, ListToolsAction, tool

__all__ = ["ToolsDemoObservation", "ToolsDemoState", "ToolsDemoEnvironment"]


class ToolsDemoObservation(Observation):
    """The number of tool calls made in this session."""

    tool_calls: int = 0


class ToolsDemoState(State):
    """Base state plus the number of tool calls."""

    tool_calls: int = 0


class ToolsDemoEnvironment(Environment[Action, ToolsDemoObservation, ToolsDemoState]):
    """Tools: ``add(a, b)``, ``greet(name, punctuation="!")`` and ``fail(message)`` (always raises)."""

    action_type = Action
    observation_type = ToolsDemoObservation
    state_type = ToolsDemoState
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = ToolsDemoState()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ToolsDemoObservation:
        self._state = ToolsDemoState(episode_id=episode_id or str(uuid.uuid4()))
        return ToolsDemoObservation(tool_calls=0)

    def step(self, action: Action) -> ToolsDemoObservation:
        self._state.step_count += 1
        return ToolsDemoObservation(tool_calls=self._state.tool_calls, metadata={"step": self._state.step_count})

    def step_tool(self, action: ListToolsAction | CallToolAction) -> Observation:
        observation = super().step_tool(action)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            # a call through the step loop is scored: 1.0 when the tool answered, 0.0 when the call failed
            # (unknown tool, bad arguments, the tool raised); the episode never ends on its own (done=False)
            observation.reward = 0.0 if getattr(observation, "error", None) else 1.0
        return observation

    @property
    def state(self) -> ToolsDemoState:
        return self._state

    @tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self._state.tool_calls += 1
        return a + b

    @tool
    def greet(self, name: str, punctuation: str = "!") -> str:
        """Greet someone by name."""
        self._state.tool_calls += 1
        return f"Hello, {name}{punctuation}"

    @tool
    def fail(self, message: str) -> None:
        """Always raises ``RuntimeError(message)``."""
        raise RuntimeError(message)
