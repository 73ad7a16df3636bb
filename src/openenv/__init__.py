"""openenv: a fast, safe client for OpenEnv environments.

Pick a flavour with one import; both have the same names and parameters::

    from openenv.sync import Env    # blocking, no event loop
    from openenv.aio import Env     # asyncio

This package itself exports only what both flavours share (errors, models,
codecs) and imports neither flavour.
"""

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
from ._core.mcp import Tool, ToolResult
from ._core.models import Action, Observation, State, StepResult

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
