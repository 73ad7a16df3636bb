"""Guess-the-number: FastMCP tools through ``MCPEnvironment``, scored inside ``step``.

Tools: ``guess(number)`` answers ``"higher"``, ``"lower"`` or ``"correct: ..."``;
``hint()`` tells whether the number is even or odd.  Every tool call is a step:
a right guess gives reward 1.0 and ends the episode, a wrong one gives -0.1, a
hint 0.0; the episode also ends after ``max_steps`` tool calls.  ``reset(seed=...)``
picks the number deterministically from the seed.  Listing tools is not a step.

Both ``step`` (HTTP, simulation) and ``step_async`` (what the 0.3.0 WebSocket
handler calls for an ``MCPEnvironment``) go through the same scoring.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from fastmcp import FastMCP

from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation

try:  # as a package (mcp_guess.server...) or from the env folder (uvicorn server.app:app)
    from ..models import CORRECT_REWARD, DEFAULT_MAX_STEPS, HIGH, LOW, WRONG_REWARD, GuessObservation, GuessState
except ImportError:
    from models import CORRECT_REWARD, DEFAULT_MAX_STEPS, HIGH, LOW, WRONG_REWARD, GuessObservation, GuessState


class MCPGuessEnvironment(MCPEnvironment):
    """One session's game; a new instance per WebSocket session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("mcp_guess")

        @mcp.tool()
        def guess(number: int) -> str:
            """Guess the secret number; the answer says higher, lower or correct."""
            return self._guess(number)

        @mcp.tool()
        def hint() -> str:
            """Whether the secret number is even or odd."""
            self._state.hints += 1
            return "even" if self._target % 2 == 0 else "odd"

        super().__init__(mcp)
        self._target = LOW
        self._outcome: str | None = None
        self._state = GuessState(episode_id=None, step_count=0)

    # --- episode ---------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, max_steps: int = DEFAULT_MAX_STEPS, **kwargs: Any
    ) -> GuessObservation:
        self._target = random.Random(seed).randint(LOW, HIGH)
        self._outcome = None
        self._state = GuessState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, max_steps=max_steps)
        message = f"Guess a number between {LOW} and {HIGH} in at most {max_steps} tool calls."
        return GuessObservation(message=message, max_steps=max_steps, reward=0.0)

    def _guess(self, number: int) -> str:
        if self._over:
            self._outcome = "over"
            return "the episode is over: reset to play again"
        self._state.guesses.append(number)
        if number == self._target:
            self._outcome = "correct"
            return f"correct: the number was {number}"
        self._outcome = "wrong"
        return "higher" if number < self._target else "lower"

    @property
    def _over(self) -> bool:
        return self._state.solved or self._state.step_count >= self._state.max_steps

    # --- step: MCP routing by the base class, scoring here -------------------------

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        was_over = self._over
        self._outcome = None
        return self._score(action, super().step(action, timeout_s=timeout_s, **kwargs), was_over)

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        was_over = self._over
        self._outcome = None
        return self._score(action, await super().step_async(action, timeout_s=timeout_s, **kwargs), was_over)

    def _score(self, action: Action, observation: Observation, was_over: bool) -> Observation:
        if not isinstance(action, CallToolAction) or not isinstance(observation, CallToolObservation):
            return observation  # listing tools is not a step
        if was_over:
            observation.reward = 0.0
            observation.done = True
            return observation
        self._state.step_count += 1
        if self._outcome == "correct":
            self._state.solved = True
            reward = CORRECT_REWARD
        elif self._outcome == "wrong":
            reward = WRONG_REWARD
        else:  # a hint, or a call that failed before reaching the game
            reward = 0.0
        self._state.total_reward = round(self._state.total_reward + reward, 6)
        observation.reward = reward
        observation.done = self._over
        return observation

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError(f"mcp_guess takes only MCP actions (call_tool, list_tools), not {type(action).__name__}")

    @property
    def state(self) -> GuessState:
        return self._state
