"""The names both facades share (errors, models, codecs): the shared list of public names; it imports neither flavour.

``__all__`` below is the one list of the shared names (the flavoured ones are
in ``openenv._async``): ``scripts/run_unasync.py`` generates the facades'
imports from both.  The shared errors report ``openenv.errors``
as their ``__module__`` (``openenv.errors.SessionLost``, in both flavours: one
object, whose name must not say ``sync`` in asyncio code), the other shared
classes ``openenv.sync`` (documented once, under ``openenv.sync``), except the
lazy pydantic models, which keep their defining module: pydantic resolves a
subclass's inherited annotations through it.

``openenv`` itself is a namespace package: this distribution ships no
``openenv/__init__.py``, so it installs beside the released ``openenv-core`` /
``openenv`` packages (which own that file) without sharing a file with them.
Users import a flavour:

```python
from openenv.sync import Env    # blocking, no event loop
from openenv.aio import Env     # asyncio
```
"""

from typing import TYPE_CHECKING, Any

from ._core.codec import Codec
from ._core.errors import (
    BootstrapError,
    CapacityReached,
    CheckoutNotRunnable,
    ConnectError,
    ConnectTimeout,
    ContainerExited,
    DockerUnavailable,
    EnvClosed,
    EnvTimeout,
    ExecutionError,
    FactoryError,
    ImageNotFound,
    InvalidAction,
    InvalidActionType,
    InvalidHeader,
    InvalidJSON,
    InvalidOption,
    InvalidURL,
    MessageTimeout,
    MessageTooLarge,
    OpenEnvError,
    ParseError,
    PoolError,
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
from ._core.options import ClientOptions
from ._core.pool import Completed, PoolMetrics, PoolOptions
from ._core.result import StepResult

if TYPE_CHECKING:
    from ._core.models import Action, Observation, State
    from ._core.tool_models import Tool, ToolResult

# pydantic models load on first access: importing a client must stay light.
_LAZY = {
    "Action": "openenv._core.models",
    "Observation": "openenv._core.models",
    "State": "openenv._core.models",
    "Tool": "openenv._core.tool_models",
    "ToolResult": "openenv._core.tool_models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Action",
    "BootstrapError",
    "CapacityReached",
    "CheckoutNotRunnable",
    "ClientOptions",
    "Codec",
    "Completed",
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
    "InvalidHeader",
    "InvalidAction",
    "InvalidActionType",
    "InvalidJSON",
    "InvalidOption",
    "InvalidURL",
    "MessageTimeout",
    "MessageTooLarge",
    "Observation",
    "OpenEnvError",
    "ParseError",
    "PoolError",
    "PoolMetrics",
    "PoolOptions",
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


def publish(obj: Any, module: str) -> None:
    """Give ``obj`` (a class or function) the public module name ``module``.

    A class's own string annotations are resolved first, in its defining module
    (``typing.get_type_hints`` looks them up in ``__module__``'s namespace,
    which is now the facade's); one that cannot be resolved there stays a string.
    """
    own = obj.__dict__.get("__annotations__") if isinstance(obj, type) else None
    if own:
        import sys

        namespace = vars(sys.modules[obj.__module__])
        resolved = {}
        for key, value in own.items():
            if isinstance(value, str):
                try:
                    value = eval(value, namespace, dict(vars(obj)))  # our own source's annotations
                except Exception:  # a name imported only for type checkers: as before, unresolvable
                    pass
            resolved[key] = value
        obj.__annotations__ = resolved
    obj.__module__ = module


#: the public home of the errors: a neutral module (neither flavour), which imports only the errors
ERRORS_MODULE = "openenv.errors"


def _publish_all() -> None:
    namespace = globals()
    for name in __all__:
        if name not in _LAZY:
            value = namespace[name]
            is_error = isinstance(value, type) and issubclass(value, BaseException)
            # errors: openenv.errors.X, the same in both flavours; the rest: openenv.sync.X (no asyncio either)
            publish(value, ERRORS_MODULE if is_error else "openenv.sync")


_publish_all()
del _publish_all
