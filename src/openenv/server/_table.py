"""The session table and its capacity, without I/O.

`SessionTable` holds the capacity slots (`SessionTable.reserve_slot()`, the
``CAPACITY_REACHED`` frame and ``503``), and the live sessions: a ``/ws``
connection's (`SessionTable.open_session()`), ``openenv/session/create``'s
(`SessionTable.open_http_session()`), the WebSocket attach of
``/ws?session_id=``, the idle sweep and the ends.  Each session's frames are
`openenv.server._session.Session`'s; the instances come from
`openenv.server._served.ServedEnv`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from openenv._core.errors import ErrorCode

from ._http import HttpReply
from ._served import ServedEnv
from ._session import Session, aclose_quietly, close_quietly
from ._wire import error_frame as _error_frame

__all__ = ["SessionTable", "SessionExecutor"]

logger = logging.getLogger("openenv.server")

#: Makes the executor that runs every environment call of one ``openenv/session/create`` session.
SessionExecutor = Callable[[Session], "Executor | None"]


class SessionTable:
    """The capacity slots and the live sessions of one served factory.

    Args:
        served: the factory the sessions' instances come from.
        max_sessions: concurrent sessions (checked by the caller).
        session_executor: makes the executor of each ``openenv/session/create`` session.
    """

    def __init__(self, served: ServedEnv, max_sessions: int, session_executor: SessionExecutor | None) -> None:
        self.served = served
        self.max_sessions = max_sessions
        self._lock = threading.Lock()  # guards _active and _sessions
        self._active = 0
        self._sessions: dict[str, Session] = {}
        #: Makes the executor of an ``openenv/session/create`` session (``None``: calls run in the caller's thread).
        self.session_executor = session_executor

    # ------------------------------------------------------------ capacity

    @property
    def active_sessions(self) -> int:
        """Sessions holding a capacity slot right now."""
        with self._lock:
            return self._active

    def reserve_slot(self) -> bool:
        """Take a capacity slot; ``False`` at capacity."""
        with self._lock:
            if self._active >= self.max_sessions:
                return False
            self._active += 1
            return True

    def release_slot(self) -> None:
        """Give back a slot taken by `reserve_slot()`."""
        with self._lock:
            self._active -= 1

    def capacity_frame(self, active: int | None = None) -> str:
        """The ``CAPACITY_REACHED`` error frame."""
        if active is None:
            active = self.active_sessions
        logger.info("refusing a session: at capacity (%d/%d)", active, self.max_sessions)
        return _error_frame(
            ErrorCode.CAPACITY_REACHED,
            f"Server at capacity: {active}/{self.max_sessions} sessions active. Cannot accept new connections.",
            active_sessions=active,
            max_sessions=self.max_sessions,
        )

    def capacity_reply(self) -> HttpReply:
        """``503`` whose body is the ``CAPACITY_REACHED`` frame (refusing a handshake)."""
        return HttpReply(503, self.capacity_frame().encode("utf-8"), "application/json", (("Retry-After", "1"),))

    def _factory_error(self) -> str:
        return _error_frame(
            ErrorCode.FACTORY_ERROR,
            f"Environment factory '{self.served.factory_name}' failed to create instance.",
            factory_name=self.served.factory_name,
        )

    def open_session(self, *, reserved: bool = False) -> tuple[Session | None, str | None]:
        """A new ``/ws`` session: (session, ``None``) or (``None``, the error frame to send before closing).

        Args:
            reserved: the caller already holds a slot (from `reserve_slot()`);
                it becomes the session's (and is given back on failure).
        """
        if not reserved and not self.reserve_slot():
            return None, self.capacity_frame()
        env, error = self.served.create_env(self._factory_error)
        if error is not None:
            self.release_slot()
            return None, error
        session = Session(self, env, str(uuid.uuid4()), owner="ws")
        with self._lock:
            self._sessions[session.session_id] = session
        return session, None

    def open_http_session(self, env: Any) -> Session:
        """Register a session for ``env`` made by ``openenv/session/create`` (its slot already reserved).

        Its executor comes from ``session_executor``; it lives until
        ``openenv/session/close`` (`end_unless_attached()`), `expire_idle()` or
        `end_all()`.
        """
        session = Session(self, env, str(uuid.uuid4()), owner="http")
        if self.session_executor is not None:
            session.executor = self.session_executor(session)
        with self._lock:
            self._sessions[session.session_id] = session
        return session

    def use_session(self, target: Any) -> Session | None:
        """The live session ``target`` names, marked busy (so no sweep ends it meanwhile), or ``None``.

        Pair each session returned with `done_with()`.
        """
        if not isinstance(target, str):
            return None
        with self._lock:
            session = self._sessions.get(target)
            if session is None or session.ended:
                return None
            session.busy += 1
            return session

    def done_with(self, session: Session) -> None:
        """A call that `use_session()` allowed has finished: the session is used, and no longer busy."""
        with self._lock:
            session.busy -= 1
            session.touched = True

    def end_unless_attached(self, session: Session) -> bool:
        """End ``session`` now (``True``), or, while a WebSocket is attached to it, once that detaches (``False``)."""
        with self._lock:
            if session.attached:
                session.closing = True
                return False
        self.end_session(session)
        return True

    def attach(self, session_id: str) -> tuple[Session | None, str | None]:
        """Attach a WebSocket to an existing session (``/ws?session_id=``): (session, ``None``) or (``None``, error)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.ended:
                error = f"Unknown session_id: {session_id}"
            elif session.attached or session.owner == "ws":
                error = f"Session {session_id} already has an attached WebSocket"
            else:
                session.attached = True
                return session, None
        return None, _error_frame(ErrorCode.SESSION_ERROR, error)

    def detach(self, session: Session) -> bool:
        """The WebSocket of ``session`` went away; ``True`` if the session must now end (`end_session()`)."""
        with self._lock:
            session.attached = False
            return session.owner == "ws" or session.closing

    def end_session(self, session: Session) -> None:
        """Close the session's environment (through `Session.run()`) and free its slot. Idempotent."""
        with self._lock:
            if session.ended:
                return
            session.ended = True
            self._sessions.pop(session.session_id, None)
        self.close_ended(session)

    def expire_idle(self, now: float, idle_timeout: float) -> list[Session]:
        """End, in the table, the ``openenv/session/create`` sessions unused for ``idle_timeout``.

        A transport calls it every few seconds with its clock (``now``, in
        seconds) and hands each session returned to `close_ended()`.  A
        session is in use while a WebSocket is attached to it or a ``POST /mcp``
        call runs on it; its idle time counts from the first sweep that finds it
        unused, so it ends between ``idle_timeout`` and ``idle_timeout`` plus one
        sweep interval after its last use.  ``/ws`` sessions are left alone (their
        transport closes silent sockets itself).

        Returns:
            The sessions now ended: unknown to `lookup()` and `attach()`, their
            slots still held until `close_ended()`.
        """
        expired: list[Session] = []
        with self._lock:
            for session in list(self._sessions.values()):
                if session.owner != "http" or session.ended:
                    continue
                if session.attached or session.busy or session.touched or session.idle_since is None:
                    session.touched = False
                    session.idle_since = now
                elif now - session.idle_since >= idle_timeout:
                    session.ended = True
                    del self._sessions[session.session_id]
                    expired.append(session)
        for session in expired:
            logger.info("ending MCP session %s: unused for %g s", session.session_id, idle_timeout)
        return expired

    def close_ended(self, session: Session) -> None:
        """Close the environment of a session `expire_idle()` (or `end_session()`) ended, and free its slot."""
        try:
            session.run(lambda: close_quietly(session.env))
        finally:
            self.release_slot()
            if session.executor is not None:
                shutdown = getattr(session.executor, "shutdown", None)
                if shutdown is not None:
                    shutdown(wait=False)

    async def end_session_async(self, session: Session) -> None:
        """`end_session()` on an event loop, for a session run there (no executor): awaits an async ``close``."""
        with self._lock:
            if session.ended:
                return
            session.ended = True
            self._sessions.pop(session.session_id, None)
        try:
            await aclose_quietly(session.env)
        finally:
            self.release_slot()

    def end_all(self) -> None:
        """End every session (server shutdown)."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            self.end_session(session)

    def lookup(self, session_id: str) -> Session | None:
        """The live session ``session_id``, if any."""
        with self._lock:
            session = self._sessions.get(session_id)
        return None if session is None or session.ended else session
