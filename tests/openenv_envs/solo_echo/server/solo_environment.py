"""Echoes each message with the server's PID (so a test sees which server answered)."""

import os
import time
from typing import Any

from openenv.server import Environment, State

from ..models import SoloAction, SoloObservation


class SoloEnvironment(Environment):
    action_type = SoloAction
    observation_type = SoloObservation
    state_type = State

    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> SoloObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return SoloObservation(echoed_message="ready", server_pid=os.getpid(), reward=0.0)

    def step(self, action: SoloAction) -> SoloObservation:
        self._state.step_count += 1
        return SoloObservation(echoed_message=action.message, server_pid=os.getpid(), reward=1.0)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        if os.environ.get("SOLO_ECHO_CLOSE_DELAY"):  # a server slow to free a slot (tests/_async/test_servers.py)
            time.sleep(float(os.environ["SOLO_ECHO_CLOSE_DELAY"]))
