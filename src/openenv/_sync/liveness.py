# GENERATED from src/openenv/_async/liveness.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Whether a server the client started has died: asked after a connection to it failed."""

from __future__ import annotations

from typing import Any

from .._core.errors import ProviderError
from .._shim_sync import sleep

__all__ = ["death_of"]

#: Seconds between the checks: a client may see the connection drop a moment before the process can be reaped.
_RECHECKS = (0.0, 0.05, 0.1, 0.2, 0.4)


def death_of(provider: Any) -> str | None:
    """Why the server of ``provider`` died (its ``check()`` raised), else ``None`` (alive, or not known).

    A provider without ``check()`` (a [`Provider`][openenv.sync.Provider]
    need not have one) is never known dead.  Checks a few times within
    0.75 s, since a killed process's sockets close before it can be reaped.
    """
    check = getattr(provider, "check", None)
    if check is None:
        return None
    for delay in _RECHECKS:
        if delay:
            sleep(delay)
        try:
            check()
        except ProviderError as exc:
            return str(exc)
    return None
