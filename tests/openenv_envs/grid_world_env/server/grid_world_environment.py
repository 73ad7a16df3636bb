"""A 5x5 Grid World: the agent starts at [0, 0] and must reach [4, 4]."""

import uuid

from openenv.core.env_server import Environment
from openenv.core.env_server.types import State

from ..models import GridWorldAction, GridWorldObservation, MoveAction


class GridWorldEnvironment(Environment):
    """Each step costs 0.1; reaching the goal scores 1.0 and ends the episode."""

    def __init__(self):
        super().__init__()
        self.grid_size = 5
        self.goal_pos = [4, 4]
        self.agent_x = 0
        self.agent_y = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs) -> GridWorldObservation:
        self.agent_x = 0
        self.agent_y = 0
        self._state.step_count = 0
        self._state.episode_id = episode_id or str(uuid.uuid4())
        return GridWorldObservation(
            x=self.agent_x, y=self.agent_y, message="Welcome to Grid World! Goal is at [4, 4].", reward=0.0, done=False
        )

    def step(self, action: GridWorldAction, timeout_s=None, **kwargs) -> GridWorldObservation:
        self._state.step_count += 1
        move = action.action
        if move == MoveAction.UP:
            self.agent_x -= 1
        elif move == MoveAction.DOWN:
            self.agent_x += 1
        elif move == MoveAction.LEFT:
            self.agent_y -= 1
        elif move == MoveAction.RIGHT:
            self.agent_y += 1
        self.agent_x = max(0, min(self.agent_x, self.grid_size - 1))
        self.agent_y = max(0, min(self.agent_y, self.grid_size - 1))
        done = False
        message = "Keep going..."
        reward = -0.1
        if [self.agent_x, self.agent_y] == self.goal_pos:
            reward = 1.0
            done = True
            message = "You found the goal!"
        return GridWorldObservation(x=self.agent_x, y=self.agent_y, message=message, reward=reward, done=done)

    @property
    def state(self) -> State:
        return self._state
