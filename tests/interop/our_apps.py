"""Environments for OUR server that mirror ``released_apps`` (served by ``python -m openenv serve``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv.server import Action, Environment, Observation, State


class CounterAction(Action):
    delta: int = Field(le=100)


class CounterObservation(Observation):
    count: int = 0
    note: str = ""


class CounterState(State):
    total: int = 0


class CounterEnv(Environment[CounterAction, CounterObservation, CounterState]):
    action_type = CounterAction
    observation_type = CounterObservation
    state_type = CounterState

    def __init__(self) -> None:
        self._state = CounterState()
        self._count = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, start: int = 0) -> CounterObservation:
        self._state = CounterState(episode_id=episode_id or "ep", step_count=0, total=start)
        self._count = start
        return CounterObservation(count=start, note=f"seed={seed}", metadata={"reset": True})

    def step(self, action: CounterAction) -> CounterObservation:
        if action.delta == 99:
            raise RuntimeError("boom: delta 99 is cursed")
        self._count += action.delta
        self._state.step_count += 1
        self._state.total = self._count
        meta: dict[str, Any] = {"step": self._state.step_count} if action.delta else {}
        return CounterObservation(count=self._count, reward=action.delta, done=self._count >= 10, metadata=meta)

    @property
    def state(self) -> CounterState:
        return self._state
