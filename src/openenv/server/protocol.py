"""The OpenEnv server protocol, without I/O: shared by every transport.

`EnvProtocol` is what one served environment factory needs whatever carries
the bytes.  It puts together three concerns, one module each:

* `openenv.server._session`: one session's frames.  A `Session` is one
  environment instance: text frames in (`Session.handle()`), reply frames out;
* `openenv.server._table`: the session table and its capacity
  (`SessionTable`: slots, ``/ws`` sessions, ``openenv/session/create`` sessions,
  ``/ws?session_id=`` attach, the idle sweep), which `EnvProtocol` is;
* `openenv.server._served`: the served factory (`ServedEnv`): making
  instances, and what the ``GET`` routes say of the environment
  (``/metadata``, ``/schema``, ``/state``), which `EnvProtocol` hands on.

Nothing here opens a socket, starts a thread or awaits.  The rest of the
sans-I/O server sits beside it, one concern a module:

* `openenv.server._wire`: strict JSON and the frames (``error``,
  ``observation``, ``state``, the envelope errors);
* `openenv.server._http`: the HTTP routes (``GET /health`` ... ``POST /mcp``),
  their bodies and ``422`` shapes, as `HttpReply` values;
* `openenv.server._rpc`: MCP JSON-RPC, the ``mcp`` frame and ``POST /mcp``
  with its session methods.

Transports (each given the protocol; see `openenv.server._settings`):

* [`openenv.server.EnvServer`][openenv.server.EnvServer] (websockets, no extra
  dependency): ``/ws`` and the ``GET`` routes, on its asyncio server
  (`openenv.server._aio`) or its threading server (`openenv.server._threads`);
* `openenv.server.asgi.create_app()` (Starlette, for uvicorn): the whole
  HTTP surface, ``POST /reset``, ``/step`` and ``/mcp`` included.

A transport must not call one session's environment from two threads at
once: `Session.run()` serialises calls (through the session's ``executor``
when the transport gave it one, so all calls then run on that one thread, as
OpenEnv's server does).

Environments that do not block (`runs_on_loop()`: ``async`` ``reset``/``step``,
OpenEnv's ``reset_async``/``step_async``, or ``blocking = False``) may instead
be driven on an event loop with `Session.handle_async()`, which awaits the
environment's coroutines (and runs its plain methods on the session's thread,
unless ``blocking = False``).  Both entry points run the same frame logic: it
yields the one environment call it needs (an `EnvCall`) and the caller makes
it, synchronously or awaited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ._http import HttpReply, http_step_result, json_reply
from ._served import EnvFactory, ServedEnv
from ._session import EnvCall, Session, runs_on_loop
from ._table import SessionExecutor, SessionTable
from ._wire import step_result

__all__ = [
    "EnvProtocol",
    "Session",
    "EnvCall",
    "runs_on_loop",
    "HttpReply",
    "EnvFactory",
    "SessionExecutor",
    "step_result",
    "http_step_result",
    "json_reply",
]

T = TypeVar("T")


class EnvProtocol(SessionTable):
    """Everything one served environment factory needs, whatever the transport.

    The session table and its capacity (`SessionTable`'s methods), over the
    served factory (``served``, a `ServedEnv`, whose instances and ``GET``
    route answers it hands on).

    Args:
        factory: an [`Environment`][openenv.server.Environment] subclass or a zero-argument callable
            returning an environment; called once per session and once per
            stateless HTTP request (``GET /state``, ``POST /reset``, ...).
        max_sessions: concurrent sessions (``/ws`` connections and
            ``openenv/session/create`` sessions).
        name: the name ``GET /metadata`` reports (default: the environment
            class name).
        session_executor: makes the executor of each ``openenv/session/create``
            session, given the session (``None``, the default: every call of
            such a session runs in the caller's thread, under the session's
            lock). The ASGI app passes one that gives each session a thread of
            its own.

    Raises:
        TypeError: ``factory`` is not callable.
        ValueError: ``max_sessions`` is below 1, or above 1 for a class whose
            ``SUPPORTS_CONCURRENT_SESSIONS`` is false.
    """

    def __init__(
        self,
        factory: EnvFactory,
        *,
        max_sessions: int = 1,
        name: str | None = None,
        session_executor: SessionExecutor | None = None,
    ) -> None:
        if not callable(factory):
            raise TypeError(f"factory must be an Environment class or a callable, not {factory!r}")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        if (
            isinstance(factory, type)
            and max_sessions > 1
            and not getattr(factory, "SUPPORTS_CONCURRENT_SESSIONS", True)
        ):
            raise ValueError(
                f"{factory.__name__} does not support concurrent sessions "
                "(SUPPORTS_CONCURRENT_SESSIONS is false); "
                f"max_sessions must be 1, not {max_sessions}"
            )
        super().__init__(ServedEnv(factory, name), max_sessions, session_executor)

    # ------------------------------------------- the served factory, handed on

    @property
    def factory(self) -> Callable[[], Any]:
        """The factory."""
        return self.served.factory

    @property
    def factory_name(self) -> str:
        """The factory's ``__name__`` (for logs and the ``FACTORY_ERROR`` frame)."""
        return self.served.factory_name

    def create_env(self, failure: Callable[[], T]) -> tuple[Any, T | None]:
        """`ServedEnv.create_env()`."""
        return self.served.create_env(failure)

    def with_fresh_env(self, use: Callable[[Any], T], failure: Callable[[], T]) -> T:
        """`ServedEnv.with_fresh_env()`."""
        return self.served.with_fresh_env(use, failure)

    def opens_on_loop(self) -> bool:
        """`ServedEnv.opens_on_loop()`."""
        return self.served.opens_on_loop()

    def get_may_block(self, path: str) -> bool:
        """`ServedEnv.get_may_block()`."""
        return self.served.get_may_block(path)

    def env_class(self) -> type:
        """`ServedEnv.env_class()`."""
        return self.served.env_class()

    @property
    def name(self) -> str:
        """The environment's name (``name`` argument, else its class name)."""
        return self.served.name

    def metadata(self) -> dict[str, Any]:
        """The body of ``GET /metadata``."""
        return self.served.metadata()

    def schemas(self) -> dict[str, Any]:
        """The body of ``GET /schema``."""
        return self.served.schemas()

    def fresh_state(self) -> dict[str, Any]:
        """The body of ``GET /state``."""
        return self.served.fresh_state()
