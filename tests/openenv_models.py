"""Pydantic models mirroring the models of ``tests/openenv_envs/*/models.py``.

The environments' own ``models.py`` import ``openenv.core`` (the released
openenv-core), which this test process never imports: its ``openenv/__init__.py``
would take over our namespace package.  These mirrors are what a user of our SDK
writes for a typed client without installing the environment's package; the
environment's own models are used, beside our SDK, by ``tests/interop/both_driver.py``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Stance = Literal["strike", "guard", "feint"]


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(default_factory=dict)


class _Observation(BaseModel):
    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MoveAction(_Action):
    type: Literal["move"] = "move"
    stance: Stance


class ResignAction(_Action):
    type: Literal["resign"] = "resign"
    reason: str = Field(default="", max_length=200)


class RoundObservation(_Observation):
    kind: Literal["round"] = "round"
    round: int = 0
    you: Stance | None = None
    opponent: Stance | None = None
    round_winner: Literal["you", "opponent", "draw"] | None = None
    your_hp: int
    opponent_hp: int


class GameOverObservation(_Observation):
    kind: Literal["game_over"] = "game_over"
    winner: Literal["you", "opponent", "draw"]
    reason: Literal["knockout", "resigned", "rounds"]
    rounds: int
    your_hp: int
    opponent_hp: int
    message: str = ""


class DuelState(BaseModel):
    episode_id: str | None = None
    step_count: int = 0
    your_hp: int
    opponent_hp: int
    finished: bool = False
    winner: str | None = None
    history: list[list[str]] = Field(default_factory=list)


class GuessState(BaseModel):
    episode_id: str | None = None
    step_count: int = 0
    max_steps: int
    guesses: list[int] = Field(default_factory=list)
    hints: int = 0
    solved: bool = False
    total_reward: float = 0.0
