"""``StepResult``: what ``reset`` and ``step`` return on both twins (no pydantic needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["StepResult", "ObsT"]

ObsT = TypeVar("ObsT")


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
