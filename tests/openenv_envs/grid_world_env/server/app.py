"""Application entry point for the Grid World Environment (OpenEnv's WebSocket API).

As in OpenEnv's grid_world, chess and wildfire, the models are imported relative to the
package root, so this module imports only as ``grid_world_env.server.app`` (the
Dockerfile's ``uvicorn grid_world_env.server.app:app``), not as the manifest's
``server.app``.  No ``max_concurrent_envs``: the server holds one session (openenv-core's
default), like most of OpenEnv's environments.
"""

from openenv.core.env_server import create_app

from ..models import GridWorldAction, GridWorldObservation
from .grid_world_environment import GridWorldEnvironment

app = create_app(GridWorldEnvironment, GridWorldAction, GridWorldObservation, env_name="grid_world_env")


def main():
    import uvicorn

    uvicorn.run(app, host="0.0.0.0", port=8000)


if __name__ == "__main__":
    main()
