"""What the two facades (:mod:`openenv.aio`, :mod:`openenv.sync`) share: lazy access to the shared names."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def lazy_exports(module: str, namespace: dict[str, Any], shared: Iterable[str]) -> tuple[Callable[[str], Any], Any]:
    """``__getattr__`` and ``__dir__`` for a facade: shared names come from :mod:`openenv` on first use.

    The pydantic models (``Action``, ``Tool``, ...) are loaded only then, so
    importing a client stays light.
    """
    names = frozenset(shared)

    def __getattr__(name: str) -> Any:
        if name in names:
            import openenv

            value = getattr(openenv, name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
