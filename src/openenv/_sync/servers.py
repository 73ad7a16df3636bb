# GENERATED from src/openenv/_async/servers.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The servers behind one ``environment_factory`` class: started on demand, up to ``max_servers``.

An instance's first ``reset`` asks for a server (`ServerSet.acquire`); the
choice is `openenv._core.servers.place()`: the first server until one says
it is full, then a server with room, then a new one while under the cap (only
for targets the class can start more of: a Docker image, a checkout), else
wait.  A refusal (``CAPACITY_REACHED``) teaches the server's limit
(`ServerSet.refused`).  A server found dead after a failed connection
(`ServerSet.dead`) is dropped and stopped, so the next ``acquire`` starts
another.  Closing the class stops every server started here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._core import servers as core
from .._core.errors import CapacityReached, ConnectError, EnvClosed
from .._core.urls import redact_url
from .env import Env
from .liveness import death_of

__all__ = ["Server", "ServerSet"]

logger = logging.getLogger("openenv.trl")


@dataclass(eq=False)
class Server:
    """One server of the set: its URL, the client that owns its container or process, its sessions."""

    base_url: str = field(repr=False)  # it may carry a token or a capability
    root: Env[Any, Any, Any] | None
    load: int = 0
    #: started by `ServerSet.acquire` for the caller it was returned to, which has not looked yet
    fresh: bool = False
    #: why it died, once `ServerSet.dead` found out (its provider is stopped then and knows no more)
    died: str | None = None


class ServerSet:
    """The servers of one generated class, and the sessions the instances hold on each.

    Args:
        first: the server the class was generated from (``None``: none yet; the
            first `acquire` starts one: a class unpickled in another process).
        start: returns a new connected ``Env`` owning a new server (``None``:
            the target cannot be started again, such as a URL).
        max_servers: the cap on servers (``None``: no cap).
    """

    def __init__(
        self, first: Server | None, *, start: Callable[[], Any] | None = None, max_servers: int | None = None
    ) -> None:
        self._lock = threading.Lock()
        self.servers: list[Server] = [first] if first is not None else []
        self.limit: int | None = None  # sessions per server, once a server said so
        self._start = start
        self._cap = max_servers if start is not None else 1
        self._starting = 0
        self._closed = False
        self._lost: str | None = None  # why the only server died, when nothing can replace it

    @property
    def grows(self) -> bool:
        """Whether this set can start servers (its target is a Docker image or a checkout)."""
        return self._start is not None

    @property
    def cap(self) -> int | None:
        """The most servers this set runs (1 when it cannot start any)."""
        return self._cap

    def acquire(self) -> Server | None:
        """A server for one more session (its load counted), a newly started one if it comes to that.

        Returns ``None`` when every server is full and no other may start: wait and ask again.

        Raises:
            EnvClosed: the set was closed.
            ProviderError: a new server could not be started.
        """
        with self._lock:
            if self._closed:
                raise EnvClosed("the environment class was closed; call environment_factory(...) again")
            if self._lost is not None and not self.servers:
                raise ConnectError(
                    f"the server of this class died ({self._lost}) and it cannot start another (a provider, or a "
                    "fixed port); call environment_factory(...) again"
                )
            loads = [server.load for server in self.servers] + [1] * self._starting
            where = core.place(loads, self.limit, self._cap)
            if 0 <= where < len(self.servers):
                server = self.servers[where]
                server.load += 1
                return server
            if where != core.NEW or self._start is None:
                return None  # full (or only a server still starting has room): wait
            self._starting += 1
        try:
            root: Env[Any, Any, Any] = self._start()
        finally:
            with self._lock:
                self._starting -= 1
        try:
            root.disconnect()  # keep the server, free its session slot for the instance
        except BaseException:
            root.close()
            raise
        server = Server(root.base_url, root, load=1, fresh=True)
        with self._lock:
            closed = self._closed
            if not closed:
                self.servers.append(server)
        if closed:
            root.close()
            raise EnvClosed("the environment class was closed; call environment_factory(...) again")
        logger.info(
            "the servers are full (%s session(s) each): started server %d (max_servers=%s) on %s",
            self.limit if self.limit is not None else "?",
            len(self.servers),
            self._cap,
            redact_url(server.base_url),
        )
        return server

    def dead(self, server: Server) -> str | None:
        """Whether ``server`` died (its process exited, its container stopped): why, else ``None``.

        Asked after a connection to it failed.  A dead server is dropped from
        the set (its sessions no longer count, so the next `acquire()` may
        start another within ``max_servers``) and stopped: its process group
        reaped, its registry record and lease released.  Its other sessions,
        asking next, get the same reason (its stopped provider knows no more).  A server the class did
        not start (a URL), or whose provider has no ``check()``, is never known dead.
        """
        root = server.root
        if root is None:
            return None
        if server.died is not None:  # found dead (and stopped) already, for another of its sessions
            return server.died
        reason = death_of(root.provider)
        if reason is None:
            return server.died  # another session found it dead (and stopped it) meanwhile, or None
        with self._lock:
            server.died = reason
            known = server in self.servers
            if known:
                self.servers.remove(server)
                if self._start is None:  # nothing can replace it: acquire() says so from now on
                    self._lost = reason
        if known:
            logger.warning("a server of the class died and was dropped (%s): %s", redact_url(server.base_url), reason)
            try:
                root.close()  # reap it, its lifeline's watcher, its registry record
            except Exception:  # noqa: BLE001 - it is gone either way
                logger.debug("stopping a dead server failed", exc_info=True)
        return reason

    def release(self, server: Server) -> None:
        """A session on ``server`` ended (or was refused)."""
        with self._lock:
            server.load = max(0, server.load - 1)

    def refused(self, server: Server, exc: CapacityReached) -> bool:
        """``server`` refused a session; release it and learn the limit.  Whether that changed the plan."""
        learned = core.limit_from(exc.details)
        with self._lock:
            server.load = max(0, server.load - 1)
            if learned is None or learned == self.limit:
                return False
            self.limit = learned
            return True

    def close(self) -> None:
        """Stop every server started for the set (the first one too, when the class started it)."""
        with self._lock:
            self._closed = True
            servers, self.servers = self.servers, []
        failure: BaseException | None = None
        for server in servers:
            if server.root is None:
                continue
            try:
                server.root.close()
            except BaseException as exc:  # close the others first
                failure = failure or exc
        if failure is not None:
            raise failure
