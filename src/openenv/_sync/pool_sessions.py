# GENERATED from src/openenv/_async/pool_sessions.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The sessions of an ``EnvPool``: each one's client, base URL and provider.

One object per concern (as httpcore's pool keeps its connections apart from
its requests): `PoolSessions` owns what each session is and makes every new
client (``new_env``, the one place); ``_core/pool.py``'s `PoolLife` says whether
the pool is open.  The flight room (``pool_flight.py``) and the opening room
(``pool_open.py``) are handed them, and ``EnvPool`` (``pool.py``) puts the three together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic

from typing_extensions import TypeVar

from .._core.codec import Codec
from .._core.options import READY_TIMEOUT
from .env import Env
from .providers import Provider

__all__ = ["PoolSessions"]

ActT = TypeVar("ActT", default=dict[str, Any])
ObsT = TypeVar("ObsT", default=dict[str, Any])
StateT = TypeVar("StateT", default=dict[str, Any])


class PoolSessions(Generic[ActT, ObsT, StateT]):
    """What each session of a pool is: its client, its server's base URL and (when the pool started it) its provider.

    The lists are by session index and change together (``replace``, ``resize``).
    """

    def __init__(self, urls: list[str], codec: Codec[Any, Any, Any], env_options: dict[str, Any]) -> None:
        self.codec = codec
        #: the connection options of every session's ``Env``
        self.env_options = env_options
        self.urls = urls
        self.envs: list[Env[ActT, ObsT, StateT]] = [self.new_env(url) for url in urls]
        self.providers: list[Provider | None] = [None] * len(urls)
        #: servers found dead, with why, while sessions still name them (see ``PoolOpening.death``)
        self.dead_servers: list[tuple[Provider, str]] = []
        #: the factory of a pool that starts its servers (``from_provider``), else ``None``
        self.factory: Callable[[int], Provider] | None = None
        #: the cap on the servers the factory starts
        self.max_servers: int | None = None
        self.ready_timeout: float | None = READY_TIMEOUT
        #: the sessions ``resize()`` is opening (not in ``envs`` yet)
        self.growing: list[tuple[Env[ActT, ObsT, StateT], str]] = []

    def new_env(self, url: str) -> Env[ActT, ObsT, StateT]:
        """A new (not connected) client for a session on ``url``: the one place the pool makes one."""
        return Env(url, codec=self.codec, **self.env_options)
