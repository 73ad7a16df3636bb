"""The ASGI app (``server.app:app`` in openenv.yaml), served by uvicorn."""

from openenv.core.env_server import create_app

try:
    from ..models import ShoutAction, ShoutObservation
    from .shout_environment import ShoutEnvironment
except ImportError:
    from models import ShoutAction, ShoutObservation

    from server.shout_environment import ShoutEnvironment

app = create_app(ShoutEnvironment, ShoutAction, ShoutObservation, env_name="checkout_echo", max_concurrent_envs=4)
