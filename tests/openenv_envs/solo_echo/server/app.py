"""The ASGI app: one session per server (``max_sessions=1``, the default of OpenEnv's servers too)."""

from openenv.server.asgi import create_app

from .solo_environment import SoloEnvironment

app = create_app(SoloEnvironment, max_sessions=1)
