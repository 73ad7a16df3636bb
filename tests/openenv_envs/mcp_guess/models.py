"""Data models of the mcp_guess environment.

Actions are OpenEnv's MCP actions (``CallToolAction`` / ``ListToolsAction``);
tool calls come back as ``CallToolObservation`` with ``reward`` and ``done`` set
by the environment.  ``reset`` returns a :class:`GuessObservation`.
"""

from __future__ import annotations

from pydantic import Field

from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ListToolsAction
from openenv.core.env_server.types import Observation, State

LOW = 1
HIGH = 100
DEFAULT_MAX_STEPS = 8
CORRECT_REWARD = 1.0
WRONG_REWARD = -0.1


class GuessObservation(Observation):
    """What ``reset`` shows: the rules of the episode."""

    message: str = ""
    low: int = LOW
    high: int = HIGH
    max_steps: int = DEFAULT_MAX_STEPS


class GuessState(State):
    """Episode state: every tool call is a step."""

    max_steps: int = DEFAULT_MAX_STEPS
    guesses: list[int] = Field(default_factory=list)
    hints: int = 0
    solved: bool = False
    total_reward: float = 0.0


__all__ = [
    "CallToolAction",
    "CallToolObservation",
    "ListToolsAction",
    "GuessObservation",
    "GuessState",
    "LOW",
    "HIGH",
    "DEFAULT_MAX_STEPS",
    "CORRECT_REWARD",
    "WRONG_REWARD",
]
