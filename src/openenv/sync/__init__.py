"""The blocking client: ``from openenv.sync import Env``.

Same names and parameters as `openenv.aio`; no event loop, no asyncio.
"""

from typing import TYPE_CHECKING, Any

from .._core.codec import Codec as Codec
from .._core.errors import *  # noqa: F403 - the shared errors (``__all__`` below picks the public ones)
from .._core.pool import Completed as Completed
from .._core.pool import PoolMetrics as PoolMetrics
from .._core.result import StepResult as StepResult
from .._facade import lazy_exports
from .._shared import __all__ as _shared
from .._sync import DockerProvider as DockerProvider
from .._sync import Env as Env
from .._sync import EnvPool as EnvPool
from .._sync import ProcessProvider as ProcessProvider
from .._sync import Provider as Provider
from .._sync import RayProvider as RayProvider
from .._sync import ServerProvider as ServerProvider
from .._sync import environment_factory as environment_factory

if TYPE_CHECKING:
    from .._core.models import Action as Action
    from .._core.models import Observation as Observation
    from .._core.models import State as State
    from .._core.tool_models import Tool as Tool
    from .._core.tool_models import ToolResult as ToolResult

__all__ = [
    "Env",
    "EnvPool",
    "Provider",
    "ServerProvider",
    "DockerProvider",
    "ProcessProvider",
    "RayProvider",
    "environment_factory",
    *_shared,
]


_getattr, _dir = lazy_exports(__name__, globals(), _shared)


def __getattr__(name: str) -> Any:
    """The shared names (models, ``__version__``), loaded on first use."""
    return _getattr(name)


def __dir__() -> list[str]:
    return _dir()
