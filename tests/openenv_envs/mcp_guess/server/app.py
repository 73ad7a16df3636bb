"""The FastAPI app of mcp_guess, served by openenv-core's server.

    uvicorn server.app:app --host 0.0.0.0 --port 8000     (from the env folder)

``$MAX_CONCURRENT_ENVS`` sets how many WebSocket sessions may run at once (default 8).
"""

from __future__ import annotations

import os

from openenv.core.env_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

try:
    from .mcp_guess_environment import MCPGuessEnvironment
except ImportError:
    from server.mcp_guess_environment import MCPGuessEnvironment

app = create_app(
    MCPGuessEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="mcp_guess",
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "8")),
)


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    main()
