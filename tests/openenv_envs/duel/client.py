"""The duel environment's own typed client (openenv-core's ``EnvClient``).

async with DuelEnv(base_url="http://127.0.0.1:8000") as env:
    result = await env.reset(seed=1)
    result = await env.step(MoveAction(stance="strike"))
    if isinstance(result.observation, GameOverObservation): ...
"""

from __future__ import annotations

from typing import Any, Union

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import OBSERVATIONS, DuelState, GameOverObservation, MoveAction, ResignAction, RoundObservation

DuelActions = Union[MoveAction, ResignAction]  # noqa: UP007
DuelObservations = Union[RoundObservation, GameOverObservation]  # noqa: UP007


class DuelEnv(EnvClient[DuelActions, DuelObservations, DuelState]):
    """Steps take a ``MoveAction`` or a ``ResignAction``; observations are parsed by ``kind``."""

    def _step_payload(self, action: DuelActions) -> dict[str, Any]:
        if not isinstance(action, (MoveAction, ResignAction)):
            raise TypeError(f"a duel action is a MoveAction or a ResignAction, not {type(action).__name__}")
        return action.model_dump(mode="json")

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[DuelObservations]:
        fields = dict(payload.get("observation", {}))
        fields["done"] = payload.get("done", False)
        fields["reward"] = payload.get("reward")
        observation = OBSERVATIONS.validate_python(fields)
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> DuelState:
        return DuelState.model_validate(payload)
