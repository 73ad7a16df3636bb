"""The FastAPI app of duel, served by openenv-core's server.

    uvicorn server.app:app --host 0.0.0.0 --port 8000     (from the env folder)

``$MAX_CONCURRENT_ENVS`` sets how many WebSocket sessions may run at once (default 8).
"""

from __future__ import annotations

import os

from openenv.core.env_server import create_app

try:
    from ..models import DuelAction, DuelObservation
    from .duel_environment import DuelEnvironment
except ImportError:
    from models import DuelAction, DuelObservation
    from server.duel_environment import DuelEnvironment

app = create_app(
    DuelEnvironment,
    DuelAction,
    DuelObservation,
    env_name="duel",
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "8")),
)


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    main()
