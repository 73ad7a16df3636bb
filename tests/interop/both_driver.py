"""Run in a venv with BOTH openenv-core 0.3.0 and our wheel: the envs' own clients beside ours.

    python both_driver.py GUESS_URL DUEL_URL ENVS_DIR

Imports the environments' own ``client.py``/``models.py`` (which import
``openenv.core``) and ``openenv.sync`` side by side, steps each environment
through both clients, runs both CLIs, and prints one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

guess_url, duel_url, envs_dir = sys.argv[1:4]
sys.path.insert(0, envs_dir)

from duel.client import DuelEnv  # noqa: E402
from duel.models import DuelState, GameOverObservation, MoveAction, ResignAction, RoundObservation  # noqa: E402
from mcp_guess.client import MCPGuessEnv  # noqa: E402
from mcp_guess.models import GuessState  # noqa: E402

import openenv.core.env_server  # noqa: E402,F401 - theirs (the envs above import it too)
import openenv.sync as ours  # noqa: E402

out: dict[str, Any] = {}


def _obs(result: Any) -> list[Any]:
    return [type(result.observation).__name__, result.observation.model_dump(), result.reward, result.done]


# mcp_guess: their MCPToolClient (call_tool goes through step) and our generic client
their_guess = MCPGuessEnv(base_url=guess_url).sync()
with their_guess:
    their_guess.reset(seed=3)
    out["theirs_guess"] = their_guess.call_tool("guess", number=50)
    state = their_guess.state()
    out["theirs_guess_state"] = [type(state).__name__, state.step_count, state.guesses]

with ours.Env(guess_url, codec=ours.Codec(state=GuessState)) as env:
    env.reset(seed=3)
    result = env.step({"type": "call_tool", "tool_name": "guess", "arguments": {"number": 50}})
    out["ours_guess"] = result.observation["result"]["data"]
    state = env.state()
    out["ours_guess_state"] = [type(state).__name__, state.step_count, state.guesses]
    out["ours_tools"] = sorted(tool.name for tool in env.list_tools())

# duel: their typed client and ours typed with the env's own models (a union of actions)
their_duel = DuelEnv(base_url=duel_url).sync()
with their_duel:
    their_duel.reset(seed=8)
    out["theirs_duel"] = [_obs(their_duel.step(MoveAction(stance="guard"))), _obs(their_duel.step(ResignAction()))]

codec = ours.Codec(
    action=MoveAction | ResignAction, observation=RoundObservation | GameOverObservation, state=DuelState
)
with ours.Env(duel_url, codec=codec) as env:
    env.reset(seed=8)
    out["ours_duel"] = [_obs(env.step(MoveAction(stance="guard"))), _obs(env.step({"type": "resign"}))]
    state = env.state()
    out["ours_duel_state"] = [type(state).__name__, state.finished]

# our server serving an openenv-core environment: its base's reset_async/step_async only call the plain
# reset/step, so a blocked step must stall no other session (the released server runs it on a thread)
import threading  # noqa: E402

from openenv.core.env_server import Environment as CoreEnvironment  # noqa: E402
from openenv.core.env_server.types import Action as CoreAction  # noqa: E402
from openenv.core.env_server.types import Observation as CoreObservation  # noqa: E402
from openenv.core.env_server.types import State as CoreState  # noqa: E402
from openenv.server import EnvServer  # noqa: E402


class GateAction(CoreAction):
    block: bool = False


entered, released = threading.Event(), threading.Event()


class CoreBlocking(CoreEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    action_type = GateAction

    def __init__(self) -> None:
        super().__init__()
        self._state = CoreState(step_count=0)

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> CoreObservation:
        return CoreObservation()

    def step(self, action: Any, timeout_s: Any = None, **kwargs: Any) -> CoreObservation:
        if action.block:
            entered.set()
            released.wait(60)
        return CoreObservation(reward=1.0)

    @property
    def state(self) -> CoreState:
        return self._state


valve = threading.Timer(30, released.set)  # a stalled loop answers the other session only after this
valve.start()
with EnvServer(CoreBlocking, max_sessions=2) as core_server:
    with ours.Env(core_server.url) as slow, ours.Env(core_server.url) as fast:
        slow.reset()
        fast.reset()
        blocked = threading.Thread(target=slow.step, args=({"block": True},))
        blocked.start()
        entered.wait(60)
        fast.step({"block": False})
        out["core_env_answered_while_blocked"] = not released.is_set()
        released.set()
        blocked.join(60)
valve.cancel()

# both CLIs: ours is `python -m openenv`, theirs the `openenv` console script
mine = subprocess.run([sys.executable, "-m", "openenv", "--help"], capture_output=True, text=True, timeout=300)
out["ours_cli"] = [mine.returncode, "serve" in mine.stdout]
script = os.path.join(os.path.dirname(sys.executable), "openenv")
theirs = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=300)
out["theirs_cli"] = [theirs.returncode, "push" in theirs.stdout or "init" in theirs.stdout]
import openenv.core  # noqa: E402

out["core_file"] = openenv.core.__file__
out["ours_file"] = ours.__file__
print(json.dumps({"result": out}, default=str))
