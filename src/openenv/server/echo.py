"""The built-in echo environment (a twin of OpenEnv's ``echo_env``).

Each step echoes the action's ``message`` back, with its length and a reward
of ``0.1`` per character. It is what ``python -m openenv serve echo`` and
``python -m openenv run`` serve, and a handy target for tests and benchmarks.
Everything except the generated ``episode_id`` is deterministic.
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv._core.models import Action, Observation, State

from .environment import Environment

__all__ = ["EchoAction", "EchoObservation", "EchoState", "EchoEnvironment"]


class EchoAction(Action):
    """The message to echo."""

    message: str


class EchoObservation(Observation):
    """The echoed message and its length."""

    echoed_message: str
    message_length: int = 0


class EchoState(State):
    """The echo environment's state: only the base fields (``episode_id``, ``step_count``)."""


class EchoEnvironment(Environment[EchoAction, EchoObservation, EchoState]):
    """Echoes each message; reward = ``len(message) / 10``; metadata ``{"step": n}``."""

    action_type = EchoAction
    observation_type = EchoObservation
    state_type = EchoState
    SUPPORTS_CONCURRENT_SESSIONS = True
    blocking = False  # every call returns in microseconds: run on the server's loop

    def __init__(self) -> None:
        self._state = EchoState()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> EchoObservation:
        """Start an episode: ``episode_id`` is kept if given, else a new uuid4.

        ``seed`` and any other keyword are accepted and ignored.
        """
        self._state = EchoState(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="Echo environment ready!", message_length=0, done=False, reward=0.0)

    def step(self, action: EchoAction) -> EchoObservation:
        """Echo ``action.message``."""
        self._state.step_count += 1
        length = len(action.message)
        return EchoObservation(
            echoed_message=action.message,
            message_length=length,
            done=False,
            reward=length / 10,  # not length * 0.1: 7 / 10 prints 0.7, 7 * 0.1 0.7000000000000001
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> EchoState:
        """The episode id and the number of steps since the last reset."""
        return self._state
