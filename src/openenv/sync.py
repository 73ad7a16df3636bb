"""The blocking client: ``from openenv.sync import Env``.

Same names and parameters as :mod:`openenv.aio`; no event loop, no asyncio.
"""

from . import *  # noqa: F403 - the shared errors, models and codecs
from . import __all__ as _shared
from ._sync import DockerProvider, Env, ProcessProvider, Provider, ServerProvider

__all__ = ["Env", "Provider", "ServerProvider", "DockerProvider", "ProcessProvider", *_shared]
