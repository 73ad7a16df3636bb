"""The built-in echo environment, served only when ``GATED_ECHO_TOKEN`` is set at import."""

import os

from openenv.server.asgi import create_app
from openenv.server.echo import EchoEnvironment

if not os.environ.get("GATED_ECHO_TOKEN"):
    raise RuntimeError("GATED_ECHO_TOKEN is not set: pass it in env_vars")

app = create_app(EchoEnvironment, max_sessions=2)
