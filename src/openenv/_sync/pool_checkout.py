# GENERATED from src/openenv/_async/pool_checkout.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The checkout room of ``EnvPool``: one free session's client lent out for exclusive use, then taken back."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from .env import Env

if TYPE_CHECKING:
    from .pool import EnvPool

ActT = TypeVar("ActT", default=dict[str, Any])
ObsT = TypeVar("ObsT", default=dict[str, Any])
StateT = TypeVar("StateT", default=dict[str, Any])


class PoolCheckout(Generic[ActT, ObsT, StateT]):
    """What [`EnvPool.checkout()`][openenv.sync.EnvPool.checkout] returns: a context manager that lends one session.

    Entering it (as the pool itself is entered) takes the
    lowest free session and returns its [`Env`][openenv.sync.Env]; leaving
    gives it back to the pool (its episode state unknown: no autoreset on its
    next step).  One object serves one block at a time; call ``checkout()``
    again for another.  Not constructed directly.
    """

    def __init__(self, pool: EnvPool[ActT, ObsT, StateT]) -> None:
        # the pool's parts it works with: its sessions, its books (under its lock) and its life
        self._sessions, self._core, self._lock, self._life = pool._sessions, pool._core, pool._lock, pool._life
        self._taken: tuple[int, Env[ActT, ObsT, StateT]] | None = None

    def __enter__(self) -> Env[ActT, ObsT, StateT]:
        if self._taken is not None:
            raise RuntimeError("this checkout() is already in use; call checkout() again")
        self._life.check_open()
        with self._lock:
            index = self._core.checkout()
        self._taken = (index, self._sessions.envs[index])
        return self._taken[1]

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        taken, self._taken = self._taken, None
        if taken is not None:
            index, env = taken
            envs = self._sessions.envs
            if index < len(envs) and envs[index] is env:  # not replaced or removed meanwhile
                self._core.checkin(index)
