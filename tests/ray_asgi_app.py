"""An ASGI app at module level, as OpenEnv environments ship one (``RayProvider(app="tests.ray_asgi_app:app")``)."""

from __future__ import annotations

import os

from openenv.server.asgi import create_app

from .envs import CounterEnv

app = create_app(CounterEnv, max_sessions=int(os.environ.get("MAX_CONCURRENT_ENVS", "1")))
