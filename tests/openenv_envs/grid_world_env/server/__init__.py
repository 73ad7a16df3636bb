"""Grid World environment server components."""

from .grid_world_environment import GridWorldEnvironment

__all__ = ["GridWorldEnvironment"]
