"""Environments for OUR server that mirror ``released_apps`` (served by ``python -m openenv serve``)."""

from __future__ import annotations

from ..envs import BasicCounterAction, BasicCounterEnv, BasicCounterObservation, CounterState

__all__ = ["CounterAction", "CounterObservation", "CounterState", "CounterEnv"]

# the counter is tests/envs.py's (released_apps.py mirrors it)
CounterAction = BasicCounterAction
CounterObservation = BasicCounterObservation
CounterEnv = BasicCounterEnv
