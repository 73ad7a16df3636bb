"""The grid world's action and observation (pydantic models of openenv-core)."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from openenv.core.env_server.types import Action, Observation


class MoveAction(str, Enum):
    UP = "UP"
    DOWN = "DOWN"
    LEFT = "LEFT"
    RIGHT = "RIGHT"


class GridWorldAction(Action):
    action: MoveAction = Field(..., description="The direction to move the agent.")


class GridWorldObservation(Observation):
    x: int = Field(..., description="Current X position")
    y: int = Field(..., description="Current Y position")
    message: str = Field("", description="Status message")
    reward: float = Field(0.0, description="Reward received from the last action")
    done: bool = Field(False, description="Whether the episode has ended")
