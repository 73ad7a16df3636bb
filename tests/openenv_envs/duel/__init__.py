"""A duel against a seeded opponent (OpenEnv layout)."""

from .client import DuelEnv
from .models import DuelState, GameOverObservation, MoveAction, ResignAction, RoundObservation

__all__ = ["DuelEnv", "MoveAction", "ResignAction", "RoundObservation", "GameOverObservation", "DuelState"]
