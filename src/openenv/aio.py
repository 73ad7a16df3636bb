"""The asyncio client: ``from openenv.aio import Env``.

Same names and parameters as :mod:`openenv.sync`; every IO method is awaited.
"""

from . import *  # noqa: F403 - the shared errors, models and codecs
from . import __all__ as _shared
from ._async import DockerProvider, Env, ProcessProvider, Provider, ServerProvider

__all__ = ["Env", "Provider", "ServerProvider", "DockerProvider", "ProcessProvider", *_shared]
