"""What the two facades (`openenv.aio`, `openenv.sync`) share: how a facade is finished.

The public names are listed once: the flavoured ones in ``__all__`` of
``openenv._async`` (generated into ``openenv._sync``), the shared ones in
``__all__`` of ``openenv._shared``.  Each facade's import block is generated
from those two lists by ``scripts/run_unasync.py`` (so mypy and IDEs see every
name with its type); ``finish`` does the rest at import time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any


def finish(
    module: str, namespace: dict[str, Any], flavoured: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Name the facade's flavoured objects after it; return its ``__getattr__`` and ``__dir__``.

    ``Env.__module__`` becomes ``openenv.sync`` (or ``openenv.aio``), so reprs
    and tracebacks show the name the docs use (the shared names are named in
    ``openenv._shared``).  ``__getattr__`` loads the lazy shared names (the
    pydantic models: importing a client stays light) and ``__version__`` (read
    from the installed distribution's metadata) on first use; ``__dir__`` shows
    the public names only.
    """
    from ._shared import publish

    for name in flavoured:
        publish(namespace[name], module)
    public = frozenset(namespace["__all__"])

    def __getattr__(name: str) -> Any:
        if name in public:
            from . import _shared

            value = getattr(_shared, name)
        elif name == "__version__":
            value = version()
        else:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        dunders = {n for n in namespace if n.startswith("__") and n.endswith("__")}
        return sorted(public | dunders | {"__version__"})

    return __getattr__, __dir__


@functools.lru_cache(maxsize=1)
def version() -> str:
    """This distribution's version (``openenv-twin``), from its installed metadata (read once: a scan of the path).

    Cached, so that ``GET /metadata`` does no file system scan on a server's event loop.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("openenv-twin")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
        return "0+unknown"
