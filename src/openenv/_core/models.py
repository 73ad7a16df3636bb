"""Protocol data models shared by the client twins and the server.

``Action``, ``Observation`` and ``State`` mirror the base models of the OpenEnv
protocol; environments subclass them.  ``StepResult`` is what ``reset`` and
``step`` return on both twins.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from .result import ObsT, StepResult

__all__ = ["Action", "Observation", "State", "StepResult", "ObsT"]


class Action(BaseModel):
    """Base action: one ``metadata`` field; unknown fields are refused."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", validate_assignment=True)

    metadata: dict[str, Any] = Field(default_factory=dict)


class Observation(BaseModel):
    """Base observation: ``done``, ``reward`` and ``metadata`` plus the environment's fields."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", validate_assignment=True)

    done: bool = False
    reward: bool | int | float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class State(BaseModel):
    """Base state: ``episode_id`` and ``step_count``; extra fields are allowed."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow", validate_assignment=True)

    episode_id: str | None = None
    step_count: int = Field(default=0, ge=0)
