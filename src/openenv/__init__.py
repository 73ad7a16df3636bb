"""openenv: a fast, safe client for OpenEnv environments.

Pick a flavour with one import; both have the same names and parameters::

    from openenv.sync import Env    # blocking, no event loop
    from openenv.aio import Env     # asyncio

This package itself exports only what both flavours share (errors, models,
codecs) and imports neither flavour.
"""

from typing import TYPE_CHECKING, Any

from ._core.codec import Codec
from ._core.errors import (
    CapacityReached,
    ConnectError,
    ConnectTimeout,
    ContainerExited,
    DockerUnavailable,
    EnvClosed,
    EnvTimeout,
    ExecutionError,
    FactoryError,
    ImageNotFound,
    InvalidJSON,
    InvalidURL,
    MessageTimeout,
    MessageTooLarge,
    OpenEnvError,
    PortNotPublished,
    ProtocolError,
    ProviderError,
    ReadinessTimeout,
    ServerError,
    ServerValidationError,
    SessionBusy,
    SessionError,
    SessionLost,
    ToolError,
    ToolNotFound,
    UnknownMessageType,
)
from ._core.result import StepResult

if TYPE_CHECKING:
    from ._core.models import Action, Observation, State
    from ._core.tool_models import Tool, ToolResult

# pydantic models load on first access: importing a client must stay light.
_LAZY = {
    "Action": "._core.models",
    "Observation": "._core.models",
    "State": "._core.models",
    "Tool": "._core.tool_models",
    "ToolResult": "._core.tool_models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "Action",
    "CapacityReached",
    "Codec",
    "ConnectError",
    "ContainerExited",
    "DockerUnavailable",
    "ImageNotFound",
    "PortNotPublished",
    "ProviderError",
    "ReadinessTimeout",
    "ConnectTimeout",
    "EnvClosed",
    "EnvTimeout",
    "ExecutionError",
    "FactoryError",
    "InvalidJSON",
    "InvalidURL",
    "MessageTimeout",
    "MessageTooLarge",
    "Observation",
    "OpenEnvError",
    "ProtocolError",
    "ServerError",
    "ServerValidationError",
    "SessionBusy",
    "SessionError",
    "SessionLost",
    "State",
    "StepResult",
    "Tool",
    "ToolError",
    "ToolNotFound",
    "ToolResult",
    "UnknownMessageType",
]
