"""Protocol data models shared by the client twins and the server.

``Action``, ``Observation`` and ``State`` mirror the base models of the OpenEnv
protocol; environments subclass them.  ``StepResult`` is what ``reset`` and
``step`` return on both twins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Action", "Observation", "State", "StepResult", "ObsT"]

ObsT = TypeVar("ObsT")


class Action(BaseModel):
    """Base action: one ``metadata`` field; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    metadata: dict[str, Any] = Field(default_factory=dict)


class Observation(BaseModel):
    """Base observation: ``done``, ``reward`` and ``metadata`` plus the environment's fields."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    done: bool = False
    reward: bool | int | float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class State(BaseModel):
    """Base state: ``episode_id`` and ``step_count``; extra fields are allowed."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    episode_id: str | None = None
    step_count: int = Field(default=0, ge=0)


@dataclass
class StepResult(Generic[ObsT]):
    """The result of ``reset`` or ``step``.

    Attributes:
        observation: the environment's observation: a plain ``dict`` for a
            generic client, the environment's observation model for a typed one.
        reward: the step's reward, as a float, or ``None`` when the server sent none.
        done: whether the episode is over.
        metadata: the step's metadata; always a dict (``{}`` when the server sent
            none, as OpenEnv 0.3 servers and empty 0.10 ``/ws`` replies do).
    """

    observation: ObsT
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
