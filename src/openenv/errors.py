"""The errors of both flavours, in one neutral home: ``openenv.errors.SessionLost``.

Every error class is one object in both flavours (``openenv.aio.SessionLost is
openenv.sync.SessionLost is openenv.errors.SessionLost``), so it cannot print
under the flavour a program imported; it prints, pickles and is documented
under this module instead, which names neither flavour, so an error raised in
``openenv.aio`` code does not print as ``openenv.sync.X``. This module imports
only the sans-IO error definitions (no asyncio, no websockets, no httpx): a
pickled error loads light in any process. Import errors from here or from the
flavour you use; both give the same classes.
"""

from . import _shared  # noqa: F401  # gives the classes their public name, as importing a flavour does
from ._core.errors import (
    BootstrapError as BootstrapError,
)
from ._core.errors import (
    CapacityReached as CapacityReached,
)
from ._core.errors import (
    CheckoutNotRunnable as CheckoutNotRunnable,
)
from ._core.errors import (
    ConnectError as ConnectError,
)
from ._core.errors import (
    ConnectTimeout as ConnectTimeout,
)
from ._core.errors import (
    ContainerExited as ContainerExited,
)
from ._core.errors import (
    DockerUnavailable as DockerUnavailable,
)
from ._core.errors import (
    EnvClosed as EnvClosed,
)
from ._core.errors import (
    EnvTimeout as EnvTimeout,
)
from ._core.errors import (
    ExecutionError as ExecutionError,
)
from ._core.errors import (
    FactoryError as FactoryError,
)
from ._core.errors import (
    ImageNotFound as ImageNotFound,
)
from ._core.errors import (
    InvalidAction as InvalidAction,
)
from ._core.errors import (
    InvalidActionType as InvalidActionType,
)
from ._core.errors import (
    InvalidHeader as InvalidHeader,
)
from ._core.errors import (
    InvalidJSON as InvalidJSON,
)
from ._core.errors import (
    InvalidOption as InvalidOption,
)
from ._core.errors import (
    InvalidURL as InvalidURL,
)
from ._core.errors import (
    MessageTimeout as MessageTimeout,
)
from ._core.errors import (
    MessageTooLarge as MessageTooLarge,
)
from ._core.errors import (
    OpenEnvError as OpenEnvError,
)
from ._core.errors import (
    ParseError as ParseError,
)
from ._core.errors import (
    PoolError as PoolError,
)
from ._core.errors import (
    PortNotPublished as PortNotPublished,
)
from ._core.errors import (
    ProtocolError as ProtocolError,
)
from ._core.errors import (
    ProviderError as ProviderError,
)
from ._core.errors import (
    ReadinessTimeout as ReadinessTimeout,
)
from ._core.errors import (
    ServerError as ServerError,
)
from ._core.errors import (
    ServerValidationError as ServerValidationError,
)
from ._core.errors import (
    SessionBusy as SessionBusy,
)
from ._core.errors import (
    SessionError as SessionError,
)
from ._core.errors import (
    SessionLost as SessionLost,
)
from ._core.errors import (
    ToolError as ToolError,
)
from ._core.errors import (
    ToolNotFound as ToolNotFound,
)
from ._core.errors import (
    UnknownMessageType as UnknownMessageType,
)

__all__ = [
    "BootstrapError",
    "CapacityReached",
    "CheckoutNotRunnable",
    "ConnectError",
    "ConnectTimeout",
    "ContainerExited",
    "DockerUnavailable",
    "EnvClosed",
    "EnvTimeout",
    "ExecutionError",
    "FactoryError",
    "ImageNotFound",
    "InvalidAction",
    "InvalidActionType",
    "InvalidHeader",
    "InvalidJSON",
    "InvalidOption",
    "InvalidURL",
    "MessageTimeout",
    "MessageTooLarge",
    "OpenEnvError",
    "ParseError",
    "PoolError",
    "PortNotPublished",
    "ProtocolError",
    "ProviderError",
    "ReadinessTimeout",
    "ServerError",
    "ServerValidationError",
    "SessionBusy",
    "SessionError",
    "SessionLost",
    "ToolError",
    "ToolNotFound",
    "UnknownMessageType",
]
