"""The grid world's own client (openenv-core's ``EnvClient``)."""

from __future__ import annotations

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import State

from .models import GridWorldAction, GridWorldObservation, MoveAction


class GridWorldEnv(EnvClient[GridWorldAction, GridWorldObservation, State]):
    """A WebSocket client of the grid world, with its pydantic models."""

    def step_move(self, move: MoveAction) -> StepResult[GridWorldObservation]:
        return super().step(GridWorldAction(action=move))

    def _step_payload(self, action: GridWorldAction) -> dict:
        return action.model_dump()

    def _parse_result(self, data: dict) -> StepResult[GridWorldObservation]:
        return StepResult(
            observation=GridWorldObservation(**data["observation"]),
            reward=data["reward"],
            done=data["done"],
        )

    def _parse_state(self, data: dict) -> State:
        return State(**data)
