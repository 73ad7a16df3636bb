"""``MODULE:ATTR`` specs: the one loader the command line, the server and Ray use.

``load_object("pkg.mod:Factory")`` imports ``pkg.mod`` and returns
``Factory`` (``ATTR`` may be dotted: ``mod:Outer.Inner``).  Importing a module
runs its code, but no socket, process or clock is touched here, and nothing
above ``_core`` is imported: the CLI (``openenv._cli``) and the Ray actor
(``openenv._ray_actor``) both call down to it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["ECHO", "load_object", "load_factory"]

#: The environment ``echo`` stands for.
ECHO = "openenv.server.echo:EchoEnvironment"


def load_object(spec: str) -> Any:
    """Import ``MODULE:ATTR`` (``ATTR`` may be dotted) and return the object.

    Raises:
        ValueError: ``spec`` is not ``MODULE:ATTR``, or the module has no such attribute.
        ImportError: the module cannot be imported.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def load_factory(spec: str) -> Callable[[], Any]:
    """Import ``MODULE:FACTORY`` (``FACTORY`` may be dotted) or the shortcut ``echo``.

    Raises:
        ValueError: ``spec`` is malformed, or the object is missing or not callable.
        ImportError: the module cannot be imported.
    """
    if spec == "echo":
        spec = ECHO
    if spec.count(":") != 1 or spec.startswith(":") or spec.endswith(":"):
        raise ValueError(f"expected MODULE:FACTORY (or 'echo'), got {spec!r}")
    obj = load_object(spec)
    if not callable(obj):
        raise ValueError(f"{spec!r} is not a class or callable")
    factory: Callable[[], Any] = obj
    return factory
