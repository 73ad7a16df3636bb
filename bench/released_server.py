"""The released OpenEnv server (``openenv==0.10.0``: FastAPI + uvicorn) serving an echo environment.

Runs only in the released package's venv (its import name ``openenv`` clashes
with ours): ``python bench/released_server.py --max-sessions N``. The
environment is the same logic as our ``openenv.server.echo.EchoEnvironment``
(same observation fields, reward and metadata), written against the released
``openenv.core.env_server`` base classes; ``create_app`` builds the app the way
a released environment's ``server/app.py`` does (``ENABLE_WEB_INTERFACE`` off),
and uvicorn serves it with its defaults (one worker, no access log) on
127.0.0.1 and an ephemeral port. When it listens it prints
``serving echo (released) on http://127.0.0.1:PORT`` on stderr, the line
``bench/run.py`` waits for (our ``python -m openenv serve`` prints the same).
With ``--async`` the environment also defines ``reset_async``/``step_async``
(the same logic), which 0.10.0 awaits inline on its event loop instead of
running ``reset``/``step`` in a worker thread: its two modes.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import uuid
from typing import Any

os.environ["ENABLE_WEB_INTERFACE"] = "false"
os.environ.pop("OPENENV_MODE", None)

import uvicorn  # noqa: E402

from openenv.core.env_server import Action, Environment, Observation, State, create_app  # noqa: E402


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoEnvironment(Environment):
    """Our echo environment's logic on the released base class."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="Echo environment ready!", message_length=0, done=False, reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:  # type: ignore[override]
        self._state.step_count += 1
        n = len(action.message)
        return EchoObservation(
            echoed_message=action.message,
            message_length=n,
            done=False,
            reward=n * 0.1,
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


class AsyncEchoEnvironment(EchoEnvironment):
    """The same echo with OpenEnv's ``reset_async``/``step_async``, which 0.10.0 awaits on its loop (no thread hop)."""

    async def reset_async(  # type: ignore[override]
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:  # type: ignore[override]
        return self.step(action, timeout_s=timeout_s, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--async", dest="use_async", action="store_true", help="serve AsyncEchoEnvironment")
    args = parser.parse_args()
    env_cls = AsyncEchoEnvironment if args.use_async else EchoEnvironment
    app = create_app(env_cls, EchoAction, EchoObservation, env_name="echo", max_concurrent_envs=args.max_sessions)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    original_startup = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original_startup(sockets=sockets)
        print(f"serving echo (released) on http://127.0.0.1:{port}", file=sys.stderr, flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
