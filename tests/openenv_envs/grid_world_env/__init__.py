"""Grid World Environment: a 5x5 grid, start at [0, 0], goal at [4, 4] (OpenEnv layout)."""

from .client import GridWorldEnv
from .models import GridWorldAction, GridWorldObservation

__all__ = ["GridWorldAction", "GridWorldObservation", "GridWorldEnv"]
