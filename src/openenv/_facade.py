"""What the two facades (`openenv.aio`, `openenv.sync`) share: lazy access to the shared names."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def lazy_exports(
    module: str, namespace: dict[str, Any], shared: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a facade: shared names come from ``openenv._shared`` on first use.

    The pydantic models (``Action``, ``Tool``, ...) are loaded only then, so
    importing a client stays light.  ``__version__`` is read from the
    installed distribution's metadata on first use.
    """
    names = frozenset(shared)

    def __getattr__(name: str) -> Any:
        if name in names:
            from . import _shared

            value = getattr(_shared, name)
            namespace[name] = value
            return value
        if name == "__version__":
            value = version()
            namespace[name] = value
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__


def version() -> str:
    """This distribution's version (``openenv-twin``), from its installed metadata."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("openenv-twin")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
        return "0+unknown"
