"""The OpenEnv server protocol, without I/O: shared by both transports.

`EnvProtocol` holds what one served environment factory needs whatever
carries the bytes: the capacity accounting, the table of live sessions (for
``openenv/session/create`` and ``/ws?session_id=`` attach), and what the routes
need of the environment (`EnvProtocol.with_fresh_env()`, ``/metadata``,
``/schema``).  A `Session` is one environment instance: text frames in
(`Session.handle()`), reply frames out.  Nothing here opens a socket, starts a
thread or awaits.

The rest of the sans-I/O server sits beside it, one concern a module:

* `openenv.server._wire`: strict JSON and the frames (``error``,
  ``observation``, ``state``, the envelope errors);
* `openenv.server._http`: the HTTP routes (``GET /health`` ... ``POST /mcp``),
  their bodies and ``422`` shapes, as `HttpReply` values;
* `openenv.server._rpc`: MCP JSON-RPC, the ``mcp`` frame and ``POST /mcp``
  with its session methods.

Transports:

* [`openenv.server.EnvServer`][openenv.server.EnvServer] (websockets' threading server, no extra
  dependency): ``/ws`` and the ``GET`` routes;
* `openenv.server.asgi.create_app()` (Starlette, for uvicorn): the whole
  HTTP surface, ``POST /reset``, ``/step`` and ``/mcp`` included.

A transport must not call one session's environment from two threads at
once: `Session.run()` serialises calls (through the session's ``executor``
when the transport gave it one, so all calls then run on that one thread, as
OpenEnv's server does).

Environments that do not block (`runs_on_loop()`: ``async`` ``reset``/``step``,
OpenEnv's ``reset_async``/``step_async``, or ``blocking = False``) may instead
be driven on an event loop with `Session.handle_async()`, which awaits the
environment's coroutines.  Both entry points run the same frame logic: it
yields the one environment call it needs (an `EnvCall`) and the caller makes
it, synchronously or awaited.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import uuid
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import Executor
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from openenv._core.errors import ErrorCode
from openenv._core.models import Action, Observation, State

# The frame logic below (Session.handle/_dispatch, _reset, _step, _state) keeps its private spellings.
from ._http import HttpReply, http_step_result, json_reply
from ._rpc import mcp_frame as _mcp_frame
from ._wire import BareMessage as _BareMessage
from ._wire import DataMessage as _DataMessage
from ._wire import ResetMessage as _ResetMessage
from ._wire import envelope_error as _envelope_error
from ._wire import error_frame as _error_frame
from ._wire import observation_frame as _observation_frame
from ._wire import state_frame as _state_frame
from ._wire import step_result
from ._wire import validation_frame as _validation_frame
from .environment import Environment, filter_kwargs
from .tools import is_mcp_action, step_observation

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

logger = logging.getLogger("openenv.server")

T = TypeVar("T")

#: An [`Environment`][openenv.server.Environment] subclass, or any zero-argument callable returning an environment.
EnvFactory = type[Environment[Any, Any, Any]] | Callable[[], Environment[Any, Any, Any]]

#: Makes the executor that runs every environment call of one ``openenv/session/create`` session.
SessionExecutor = Callable[["Session"], "Executor | None"]

#: The keys a frame may have; anything else is refused as pydantic's ``extra="forbid"`` would.
_ENVELOPE_KEYS = frozenset({"type", "data"})


def _close_quietly(env: Any) -> None:
    close = getattr(env, "close", None)
    if close is None:
        return
    try:
        result = close()
        if inspect.isawaitable(result):  # ``async def close`` off the loop: a loop of its own
            asyncio.run(_awaited(result))
    except Exception:
        logger.exception("environment close() raised")


async def _aclose_quietly(env: Any) -> None:
    close = getattr(env, "close", None)
    if close is None:
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("environment close() raised")


class _Reply(NamedTuple):
    """A reply frame the step hot path made before calling the environment (an invalid action)."""

    frame: str


#: ``step`` data with these ``type`` values may be MCP actions: the general path decides.
_MCP_TYPES = ("list_tools", "call_tool")


def _loads(raw: str) -> Any:
    """The parsed frame, or the ``INVALID_JSON`` reply (a tuple: frame, keep open)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return _error_frame(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}"), True


# ------------------------------------------------------------------- sessions


class Session:
    """One environment instance and its frames: ``handle(text) -> (reply, keep_open)``.

    Made by `EnvProtocol.open_session()` (a ``/ws`` connection) or by the
    MCP method ``openenv/session/create`` (``POST /mcp``); either way it holds
    one capacity slot until `EnvProtocol.end_session()`.
    """

    def __init__(self, protocol: EnvProtocol, env: Any, session_id: str, *, owner: str) -> None:
        self.protocol = protocol
        self.env = env
        self.session_id = session_id
        #: ``"ws"`` (ends with its connection) or ``"http"`` (ends with ``openenv/session/close``)
        self.owner = owner
        #: a WebSocket is attached (``/ws?session_id=``)
        self.attached = False
        #: ``openenv/session/close`` came while attached: end it when the WebSocket detaches
        self.closing = False
        #: set by a transport to run every environment call on one thread
        self.executor: Executor | None = None
        self._lock = threading.Lock()
        self.ended = False
        #: ``POST /mcp`` calls running on it right now (guarded by the protocol's lock)
        self.busy = 0
        #: used since the last `EnvProtocol.expire_idle()` sweep
        self.touched = False
        #: when the last sweep found it in use (the ``now`` it was given); ``None``: not swept yet
        self.idle_since: float | None = None
        # the step hot path's cache: the last ``step_async`` function seen, and whether it is a coroutine function
        self._alt_func: Any = None
        self._alt_coro = False

    def __repr__(self) -> str:
        return f"<Session {self.session_id} {type(self.env).__name__} owner={self.owner}>"

    def run(self, fn: Callable[[], T]) -> T:
        """Call ``fn`` (which uses the environment) serialised with every other call of this session.

        Do not call it from the session's own executor thread.
        """
        if self.executor is not None:
            return self.executor.submit(fn).result()
        with self._lock:
            return fn()

    # ------------------------------------------------------------- frames

    def handle(self, raw: str | bytes) -> tuple[str | None, bool]:
        """One inbound WebSocket message: (reply frame or ``None``, keep the session open).

        Never raises for bad input; a binary message ends the session with a
        ``SESSION_ERROR`` frame, as the reference server does.
        """
        if not isinstance(raw, str):
            # The reference server fails its receive_text() with KeyError('text').
            return _error_frame(ErrorCode.SESSION_ERROR, "'text'"), False
        try:
            msg = _loads(raw)
            if type(msg) is tuple:  # invalid JSON: the error frame
                return msg
            action = self._step_action(msg)
            if action is not None:  # the hot path: a plain step frame
                return self._step_sync(action), True
            frames = self._dispatch(msg)
            try:
                call = frames.send(None)
                while True:
                    try:
                        result = call.run(self.env, aware=False)
                        if inspect.isawaitable(result):  # async env on a thread: a loop of its own for the call
                            result = asyncio.run(_awaited(result))
                    except Exception as exc:
                        call = frames.throw(exc)
                    else:
                        call = frames.send(result)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        except Exception as exc:  # a bug here, not in the environment
            logger.exception("session failed")
            return _error_frame(ErrorCode.SESSION_ERROR, str(exc)), False

    async def handle_async(self, raw: str | bytes) -> tuple[str | None, bool]:
        """`handle()` on an event loop: the environment's coroutines are awaited on it.

        For environments that do not block (`runs_on_loop()`): sync methods
        are called on the loop too, so the transport must not use it for
        blocking ones.  ``reset_async``/``step_async``, when the environment
        defines them as coroutine functions, are preferred to ``reset``/``step``.
        """
        if not isinstance(raw, str):
            return _error_frame(ErrorCode.SESSION_ERROR, "'text'"), False
        try:
            msg = _loads(raw)
            if type(msg) is tuple:  # invalid JSON: the error frame
                return msg
            action = self._step_action(msg)
            if action is not None:  # the hot path: a plain step frame
                return await self._step_aware(action), True
            frames = self._dispatch(msg)
            try:
                call = frames.send(None)
                while True:
                    try:
                        result = call.run(self.env, aware=True)
                        if inspect.isawaitable(result):
                            result = await result
                    except Exception as exc:
                        call = frames.throw(exc)
                    else:
                        call = frames.send(result)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        except Exception as exc:  # a bug here, not in the environment
            logger.exception("session failed")
            return _error_frame(ErrorCode.SESSION_ERROR, str(exc)), False

    # ------------------------------------------------- the step hot path
    #
    # A plain ``step`` frame (``{"type":"step","data":{...}}``, no MCP action) is
    # run without the frame generator: the same checks, calls and replies as
    # `_dispatch()`/`_step()`, in straight-line code.

    def _step_action(self, msg: Any) -> Any:
        """The validated action of a plain ``step`` frame, a ``_Reply`` for an invalid one, else ``None``.

        ``None`` sends the frame down the general path (`_dispatch()`), which
        answers everything else (envelope errors, MCP actions, other types).
        """
        if type(msg) is not dict or len(msg) != 2 or msg.get("type") != "step":
            return None
        data = msg.get("data")
        if type(data) is not dict or data.get("type") in _MCP_TYPES:
            return None
        env = self.env
        action_type = getattr(env, "action_type", Action)
        try:
            return action_type.model_validate(data)
        except ValidationError as exc:
            return _Reply(_validation_frame(exc))

    def _step_sync(self, action: Any) -> str:
        """`_step()` driven by `handle()`: ``env.step(action)`` (an awaitable result run on a loop of its own)."""
        if type(action) is _Reply:
            return action.frame
        try:
            observation = self.env.step(action)
            if not isinstance(observation, BaseModel) and inspect.isawaitable(observation):
                observation = asyncio.run(_awaited(observation))
            return _observation_frame(observation)
        except ValidationError as exc:
            return _validation_frame(exc)
        except Exception as exc:
            logger.info("step raised", exc_info=True)
            return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))

    async def _step_aware(self, action: Any) -> str:
        """`_step()` driven by `handle_async()`: ``step_async`` when it is a coroutine function, else ``step``."""
        if type(action) is _Reply:
            return action.frame
        env = self.env
        try:
            step = env.step
            alt = getattr(env, "step_async", None)
            if alt is not None:
                func = getattr(alt, "__func__", alt)
                if func is not self._alt_func:  # iscoroutinefunction costs ~1 µs: once per function
                    self._alt_func, self._alt_coro = func, inspect.iscoroutinefunction(alt)
                observation = await alt(action) if self._alt_coro else step(action)
            else:
                observation = step(action)
            if not isinstance(observation, BaseModel) and inspect.isawaitable(observation):
                observation = await observation
            return _observation_frame(observation)
        except ValidationError as exc:
            return _validation_frame(exc)
        except Exception as exc:
            logger.info("step raised", exc_info=True)
            return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))

    # ------------------------------------------------- the general path

    def _dispatch(self, msg: Any) -> Generator[EnvCall, Any, tuple[str | None, bool]]:
        if not isinstance(msg, dict):
            return (
                _error_frame(
                    ErrorCode.VALIDATION_ERROR,
                    "Invalid message",
                    errors=[
                        {
                            "type": "dict_type",
                            "loc": [],
                            "msg": "Input should be a valid dictionary",
                            "input": msg,
                        }
                    ],
                ),
                True,
            )
        mtype = msg.get("type", "")
        has_data = "data" in msg
        clean = len(msg) <= 2 and msg.keys() <= _ENVELOPE_KEYS
        data = msg.get("data")
        env = self.env

        if mtype == "step":
            if not (clean and isinstance(data, dict)):
                return _envelope_error(_DataMessage, msg), True
            return (yield from _step(env, data)), True
        if mtype == "reset":
            if not has_data:
                data = {}
            if not (clean and isinstance(data, dict)):
                return _envelope_error(_ResetMessage, msg), True
            return (yield from _reset(env, data)), True
        if mtype == "state":
            if not clean or has_data:
                return _envelope_error(_BareMessage, msg), True
            return _state(env), True
        if mtype == "close":
            if not clean or has_data:
                return _envelope_error(_BareMessage, msg), True
            return None, False
        if mtype == "mcp":
            if not (clean and isinstance(data, dict)):
                return _envelope_error(_DataMessage, msg), True
            return _mcp_frame(env, data, self.session_id), True
        return _error_frame(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {mtype}"), True


class EnvCall(NamedTuple):
    """The environment call a frame needs: ``reset(**kwargs)`` or ``step(action)``.

    Yielded by the frame logic; the transport's driver makes it (`run()`) and
    sends the result back (or throws the exception in).
    """

    name: str  # "reset" or "step"
    action: Any = None
    kwargs: Mapping[str, Any] | None = None

    def run(self, env: Any, *, aware: bool) -> Any:
        """Call the method on ``env``; ``aware``: prefer ``<name>_async`` when it is a coroutine function.

        Returns what the method returns, which may be awaitable.
        """
        method = getattr(env, self.name)
        if aware:
            alt = getattr(env, self.name + "_async", None)
            if alt is not None and inspect.iscoroutinefunction(alt):
                method = alt
        kwargs = filter_kwargs(method, self.kwargs) if self.kwargs else {}
        if self.name == "step":
            return method(self.action, **kwargs)
        return method(**kwargs)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def runs_on_loop(env: Any) -> bool:
    """Whether ``env`` (an instance or a class) may run on an event loop without a thread of its own.

    True when it is asynchronous (``reset`` or ``step`` is ``async def``, or it
    defines OpenEnv's ``reset_async``/``step_async`` as coroutine functions) or
    declares ``blocking = False``. Everything else is blocking: a transport on
    an event loop gives each of its sessions a worker thread.
    """
    if getattr(env, "blocking", True) is False:
        return True
    for name in ("step", "reset", "step_async", "reset_async"):
        if inspect.iscoroutinefunction(getattr(env, name, None)):
            return True
    return False


def _reset(env: Any, data: dict[str, Any]) -> Generator[EnvCall, Any, str]:
    try:
        observation = yield EnvCall("reset", None, data)
        return _observation_frame(observation)
    except ValidationError as exc:
        return _validation_frame(exc)
    except Exception as exc:
        logger.info("reset raised", exc_info=True)
        return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))


def _step(env: Any, data: dict[str, Any]) -> Generator[EnvCall, Any, str]:
    mcp_action = is_mcp_action(env, data)  # list_tools / call_tool through the step loop
    if not mcp_action:
        action_type: type[BaseModel] = getattr(env, "action_type", Action)
        try:
            action = action_type.model_validate(data)
        except ValidationError as exc:
            return _validation_frame(exc)
    try:
        if mcp_action:
            return _observation_frame(step_observation(env, data))
        observation = yield EnvCall("step", action)
        return _observation_frame(observation)
    except ValidationError as exc:
        return _validation_frame(exc)
    except Exception as exc:
        logger.info("step raised", exc_info=True)
        return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))


def _state(env: Any) -> str:
    try:
        return _state_frame(env.state)
    except ValidationError as exc:
        return _validation_frame(exc)
    except Exception as exc:
        logger.info("state raised", exc_info=True)
        return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))


# ------------------------------------------------------------------- protocol


class EnvProtocol:
    """Everything one served environment factory needs, whatever the transport.

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
        self.factory: Callable[[], Any] = factory
        self.factory_name: str = getattr(factory, "__name__", None) or str(factory)
        self._env_cls: type | None = factory if isinstance(factory, type) else None
        self.max_sessions = max_sessions
        self._name = name
        self._lock = threading.Lock()  # guards _active and _sessions
        self._active = 0
        self._sessions: dict[str, Session] = {}
        self._schema: dict[str, Any] | None = None
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

    # ------------------------------------------------------- environments

    def create_env(self, failure: Callable[[], T]) -> tuple[Any, T | None]:
        """A new instance from the factory: ``(env, None)``, or ``(None, failure())`` when the factory raised.

        The one place a factory's failure is handled: it is logged with its
        traceback and the caller answers with what ``failure`` makes (an
        error frame, a ``500``, a JSON-RPC error).
        """
        try:
            return self.factory(), None
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            return None, failure()

    def with_fresh_env(self, use: Callable[[Any], T], failure: Callable[[], T]) -> T:
        """``use(env)`` on a throw-away instance, closed afterwards; ``failure()`` when the factory raised.

        For the stateless routes (``POST /reset``, ``/step``, ``/mcp`` without
        a session): the instance holds no capacity slot.
        """
        env, error = self.create_env(failure)
        if error is not None:
            return error
        try:
            return use(env)
        finally:
            _close_quietly(env)

    # ------------------------------------------------------------ sessions

    def _factory_error(self) -> str:
        return _error_frame(
            ErrorCode.FACTORY_ERROR,
            f"Environment factory '{self.factory_name}' failed to create instance.",
            factory_name=self.factory_name,
        )

    def open_session(self, *, reserved: bool = False) -> tuple[Session | None, str | None]:
        """A new ``/ws`` session: (session, ``None``) or (``None``, the error frame to send before closing).

        Args:
            reserved: the caller already holds a slot (from `reserve_slot()`);
                it becomes the session's (and is given back on failure).
        """
        if not reserved and not self.reserve_slot():
            return None, self.capacity_frame()
        env, error = self.create_env(self._factory_error)
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
            session.run(lambda: _close_quietly(session.env))
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
            await _aclose_quietly(session.env)
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

    # ------------------------------------- the environment, described (GET routes)

    def get_may_block(self, path: str) -> bool:
        """Whether answering ``GET path`` may run the factory or environment code that blocks.

        A transport on an event loop answers such a request off the loop (as
        it runs a blocking environment's ``reset``/``step`` on a thread):
        ``/state`` makes a fresh instance (on the loop only for an environment
        class that `runs_on_loop()`, as its sessions are), and ``/metadata``
        and ``/schema`` make one, once, when the factory is not a class.
        ``/health`` and unknown paths touch no environment.
        """
        if path == "/state":
            cls = self._env_cls
            return cls is None or not runs_on_loop(cls)
        if path in ("/metadata", "/schema"):
            return self._env_cls is None
        return False

    def env_class(self) -> type:
        """The environment class (for a non-class factory: by creating and closing one instance, once)."""
        cls = self._env_cls
        if cls is None:
            env = self.factory()
            try:
                cls = type(env)
            finally:
                _close_quietly(env)
            self._env_cls = cls
        return cls

    @property
    def name(self) -> str:
        """The environment's name (``name`` argument, else its class name)."""
        return self._name or self.env_class().__name__

    def metadata(self) -> dict[str, Any]:
        """The body of ``GET /metadata``."""
        name = self.name
        version = getattr(self.env_class(), "version", None)
        if not isinstance(version, str):
            from openenv._facade import version as package_version

            version = package_version()
        return {
            "name": name,
            "description": f"{name} environment",
            "readme_content": None,
            "version": version,
            "author": None,
            "documentation_url": None,
        }

    def schemas(self) -> dict[str, Any]:
        """The body of ``GET /schema``."""
        schema = self._schema
        if schema is None:
            cls = self.env_class()
            action_type: type[BaseModel] = getattr(cls, "action_type", Action)
            observation_type: type[BaseModel] = getattr(cls, "observation_type", Observation)
            reset_type: type[BaseModel] = getattr(cls, "reset_observation_type", None) or observation_type
            state_type: type[BaseModel] = getattr(cls, "state_type", State)
            schema = {
                "action": action_type.model_json_schema(),
                "observation": observation_type.model_json_schema(),
                "state": state_type.model_json_schema(),
                "reset_observation": reset_type.model_json_schema(),
            }
            self._schema = schema
        return schema

    def fresh_state(self) -> dict[str, Any]:
        """The body of ``GET /state``: a fresh instance's state, filtered through its declared state model."""
        env = self.factory()
        try:
            state = env.state
            fields = getattr(type(env), "state_type", State).model_fields
            dumped = state.model_dump() if isinstance(state, BaseModel) else dict(state)
            return {k: v for k, v in dumped.items() if k in fields}
        finally:
            _close_quietly(env)
