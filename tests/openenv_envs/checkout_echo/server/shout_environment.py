"""An environment that answers each message in capitals (reward: its length / 10)."""

import uuid
from typing import Any

from openenv.core.env_server import Environment, State

try:  # as a package (pip install -e .) or from the checkout directory (uvicorn server.app:app)
    from ..models import ShoutAction, ShoutObservation
except ImportError:
    from models import ShoutAction, ShoutObservation


class ShoutEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> ShoutObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return ShoutObservation(echoed_message="ready", message_length=0, reward=0.0)

    def step(self, action: ShoutAction, timeout_s: Any = None, **kwargs: Any) -> ShoutObservation:
        self._state.step_count += 1
        text = action.message.upper()
        return ShoutObservation(echoed_message=text, message_length=len(text), reward=len(text) / 10)

    @property
    def state(self) -> State:
        return self._state
