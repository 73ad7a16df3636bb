"""One session's frames, without I/O: `Session` turns a text frame into a reply frame.

A `Session` is one environment instance: text frames in (`Session.handle()`),
reply frames out, and whether the session stays open.  It owns validation, the
error codes of a frame, the envelopes and the ``mcp`` frame (through
`openenv.server._rpc`); the session table that makes and ends sessions is
`openenv.server._table`, the served factory `openenv.server._served`, and
`openenv.server.protocol` puts them together.

Environments that do not block (`runs_on_loop()`: ``async`` ``reset``/``step``,
OpenEnv's ``reset_async``/``step_async``, or ``blocking = False``) may be driven
on an event loop with `Session.handle_async()`, which awaits the environment's
coroutines and, unless the environment says ``blocking = False``, runs its plain
methods on a worker thread (as the released server does for each method that has
no coroutine of its own).  Both entry points run the same frame logic: it yields
the one environment call it needs (an `EnvCall`) and the caller makes it,
synchronously or awaited.

openenv-core's ``Environment`` base defines ``reset_async``/``step_async`` as
coroutines that only call the blocking ``reset``/``step``; the released server
awaits them only where a subclass overrides them, and so does this one
(`async_method()`): an openenv-core environment with a plain ``step`` is blocking.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from concurrent.futures import Executor
from types import GeneratorType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from openenv._core import jsontext
from openenv._core.errors import ErrorCode
from openenv._core.models import Action

# The frame logic below (Session.handle/_dispatch, _reset, _step, _state) keeps its private spellings.
from ._rpc import mcp_frame as _mcp_frame
from ._wire import BareMessage as _BareMessage
from ._wire import DataMessage as _DataMessage
from ._wire import ResetMessage as _ResetMessage
from ._wire import envelope_error as _envelope_error
from ._wire import error_frame as _error_frame
from ._wire import observation_frame as _observation_frame
from ._wire import state_frame as _state_frame
from ._wire import validation_frame as _validation_frame
from .environment import filter_kwargs
from .tools import is_mcp_action, step_observation

if TYPE_CHECKING:
    from ._table import SessionTable

__all__ = ["Session", "EnvCall", "runs_on_loop", "opens_on_loop", "async_method", "close_quietly", "aclose_quietly"]

logger = logging.getLogger("openenv.server")

T = TypeVar("T")

#: The keys a frame may have; anything else is refused as pydantic's ``extra="forbid"`` would.
_ENVELOPE_KEYS = frozenset({"type", "data"})


def close_quietly(env: Any) -> None:
    close = getattr(env, "close", None)
    if close is None:
        return
    try:
        result = close()
        if inspect.isawaitable(result):  # ``async def close`` off the loop: a loop of its own
            asyncio.run(_awaited(result))
    except Exception:
        logger.exception("environment close() raised")


async def aclose_quietly(env: Any) -> None:
    close = getattr(env, "close", None)
    if close is None:
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("environment close() raised")


#: ``step`` data with these ``type`` values may be MCP actions: the general path decides.
_MCP_TYPES = ("list_tools", "call_tool")


def _loads(raw: str) -> Any:
    """The parsed frame, or the ``INVALID_JSON`` reply (a tuple: frame, keep open)."""
    try:
        return jsontext.loads(raw)
    except (ValueError, RecursionError) as exc:
        return _error_frame(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}"), True


class Session:
    """One environment instance and its frames: ``handle(text) -> (reply, keep_open)``.

    Made by `EnvProtocol.open_session()` (a ``/ws`` connection) or by the
    MCP method ``openenv/session/create`` (``POST /mcp``); either way it holds
    one capacity slot until `EnvProtocol.end_session()`.
    """

    def __init__(self, protocol: SessionTable, env: Any, session_id: str, *, owner: str) -> None:
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
        # the step hot path's cache: the last ``step_async`` function seen, and whether it is a coroutine of its own
        self._alt_func: Any = None
        self._alt_coro = False
        # the same for ``step``: the last function seen, and whether it is a coroutine function
        self._step_func: Any = None
        self._step_coro = False
        #: on a loop (`handle_async()`), plain methods run on a worker thread unless it says ``blocking = False``
        self.offload = getattr(env, "blocking", True) is not False
        #: set by a transport: runs a plain method (``fn()``) on the session's own thread, awaitable on the loop
        #: (``None``: the loop's default executor)
        self.offload_to: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None
        #: the thread behind ``offload_to``, when the transport ends it with the session (the ASGI app)
        self.side: Any = None

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
    #
    # One decision path, two thin drivers.  `_plan()` decides what a message
    # needs: a reply at once, the one ``step`` call of a plain step frame (the
    # hot path: no generator), or the frame generator (`_dispatch()`), which
    # yields the environment calls it needs (`EnvCall`) and turns their results
    # or exceptions into the reply.  `handle()` makes those calls in the caller's
    # thread, `handle_async()` awaits them on the loop; neither decides anything.

    def handle(self, raw: str | bytes) -> tuple[str | None, bool]:
        """One inbound WebSocket message: (reply frame or ``None``, keep the session open).

        Never raises for bad input; a binary message ends the session with a
        ``SESSION_ERROR`` frame, as the reference server does.  An ``async``
        method of the environment is run on a loop of its own.
        """
        try:
            plan = self._plan(raw)
            if type(plan) is tuple:  # answered without the environment
                return plan
            if type(plan) is not GeneratorType:  # a plain step's action: the hot path
                try:
                    observation = self.env.step(plan)
                    if not isinstance(observation, BaseModel) and inspect.isawaitable(observation):
                        observation = asyncio.run(_awaited(observation))
                    return _observation_frame(observation), True
                except Exception as exc:
                    return _failed("step", exc), True
            try:
                call = plan.send(None)
                while True:
                    try:
                        result = call.run(self.env, aware=False)
                        if inspect.isawaitable(result):  # async env on a thread: a loop of its own for the call
                            result = asyncio.run(_awaited(result))
                    except Exception as exc:
                        call = plan.throw(exc)
                    else:
                        call = plan.send(result)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        except Exception as exc:  # a bug here, not in the environment
            logger.exception("session failed")
            return _error_frame(ErrorCode.SESSION_ERROR, str(exc)), False

    async def handle_async(self, raw: str | bytes) -> tuple[str | None, bool]:
        """`handle()` on an event loop: the environment's coroutines are awaited on it.

        For environments with coroutines (`runs_on_loop()`).  Their own
        ``reset_async``/``step_async`` are preferred to ``reset``/``step``
        (`async_method()`).  A plain method is called on the loop only when the
        environment says ``blocking = False``; otherwise it runs off the loop,
        through ``offload_to`` (the session's own thread, which the transport
        sets: every plain call of a session on one thread, as OpenEnv's server
        runs them), else on the loop's default executor.
        """
        try:
            plan = self._plan(raw)
            if type(plan) is tuple:  # answered without the environment
                return plan
            env = self.env
            if type(plan) is not GeneratorType:  # a plain step's action: the hot path
                try:
                    alt = getattr(env, "step_async", None)
                    if alt is not None:
                        func = getattr(alt, "__func__", alt)
                        if func is not self._alt_func:  # iscoroutinefunction costs ~1 µs: once per function
                            self._alt_func, self._alt_coro = func, _own_coroutine(alt, func)
                    if alt is not None and self._alt_coro:
                        observation = await alt(plan)
                    else:
                        step = env.step
                        func = getattr(step, "__func__", step)
                        if func is not self._step_func:
                            self._step_func, self._step_coro = func, inspect.iscoroutinefunction(step)
                        if self._step_coro or not self.offload:
                            observation = step(plan)
                        else:  # a plain step beside async methods: on the session's thread, as the released server
                            observation = await self._offloaded(functools.partial(step, plan))
                    if not isinstance(observation, BaseModel) and inspect.isawaitable(observation):
                        observation = await observation
                    return _observation_frame(observation), True
                except Exception as exc:
                    return _failed("step", exc), True
            try:
                call = plan.send(None)
                while True:
                    try:
                        method, (args, kwargs) = call.resolve(env, aware=True)
                        if self.offload and not inspect.iscoroutinefunction(method):
                            # a plain method beside async ones: on the session's thread, as the released server
                            result = await self._offloaded(functools.partial(method, *args, **kwargs))
                        else:
                            result = method(*args, **kwargs)
                        if inspect.isawaitable(result):
                            result = await result
                    except Exception as exc:
                        call = plan.throw(exc)
                    else:
                        call = plan.send(result)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        except Exception as exc:  # a bug here, not in the environment
            logger.exception("session failed")
            return _error_frame(ErrorCode.SESSION_ERROR, str(exc)), False

    def _offloaded(self, fn: Callable[[], T]) -> Awaitable[T]:
        """``fn()`` (a plain method of an environment with coroutines too) off the loop: on the session's thread."""
        to = self.offload_to
        if to is not None:
            return to(fn)
        return asyncio.get_running_loop().run_in_executor(None, fn)

    def _plan(self, raw: str | bytes) -> Any:
        """What ``raw`` needs, for both drivers.

        Returns:
            a ``(reply, keep_open)`` tuple when no environment call is needed
            (a binary message, invalid JSON, an invalid action); the validated
            action of a plain ``step`` frame (the driver calls ``step`` and
            turns the result into the reply as `_step()` would); else the
            frame generator (`_dispatch()`).
        """
        if not isinstance(raw, str):
            # The reference server fails its receive_text() with KeyError('text').
            return _error_frame(ErrorCode.SESSION_ERROR, "'text'"), False
        msg = _loads(raw)
        if type(msg) is tuple:  # invalid JSON: the error frame
            return msg
        action = self._step_action(msg)
        if action is not None:
            return action
        return self._dispatch(msg)

    def _step_action(self, msg: Any) -> Any:
        """The validated action of a plain ``step`` frame, the reply tuple for an invalid one, else ``None``.

        A plain ``step`` frame (``{"type":"step","data":{...}}``, no MCP action)
        skips the frame generator: the same checks, call and replies as
        `_dispatch()`/`_step()`, in straight-line code.  ``None`` sends the
        frame down the general path (`_dispatch()`), which answers everything
        else (envelope errors, MCP actions, other types).
        """
        if type(msg) is not dict or len(msg) != 2 or msg.get("type") != "step":
            return None
        data = msg.get("data")
        if type(data) is not dict or data.get("type") in _MCP_TYPES:
            return None
        action_type = getattr(self.env, "action_type", Action)
        try:
            return action_type.model_validate(data)
        except ValidationError as exc:
            return _validation_frame(exc), True

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

    def resolve(self, env: Any, *, aware: bool) -> tuple[Callable[..., Any], tuple[tuple[Any, ...], dict[str, Any]]]:
        """The method to call on ``env`` and its arguments; ``aware``: prefer its own ``<name>_async``."""
        method = getattr(env, self.name)
        if aware:
            alt = async_method(env, self.name)
            if alt is not None:
                method = alt
        kwargs = filter_kwargs(method, self.kwargs) if self.kwargs else {}
        return method, ((self.action,) if self.name == "step" else (), kwargs)

    def run(self, env: Any, *, aware: bool) -> Any:
        """Call the method on ``env`` (`resolve()`); returns what it returns, which may be awaitable."""
        method, (args, kwargs) = self.resolve(env, aware=aware)
        return method(*args, **kwargs)


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
    return any(_async_call(env, name) for name in ("step", "reset"))


def opens_on_loop(env: Any) -> bool:
    """Whether ``env`` (a class) may be created on an event loop: ``blocking = False``, or no plain ``reset``/``step``.

    An environment with a plain method beside its coroutines may block in its
    constructor as well: it is created on a thread (as the released server
    creates every environment).
    """
    if getattr(env, "blocking", True) is False:
        return True
    return all(_async_call(env, name) for name in ("step", "reset"))


def closes_on_loop(session: Session) -> bool:
    """Whether a session whose coroutines ran on a loop (``offload_to`` set) is closed there: an ``async def close``.

    Its plain ``close`` runs on the session's thread, after any call still running there.
    """
    return session.offload_to is not None and inspect.iscoroutinefunction(getattr(session.env, "close", None))


def _async_call(env: Any, name: str) -> bool:
    """Whether the server's call ``name`` (``reset`` or ``step``) of ``env`` is a coroutine."""
    return async_method(env, name) is not None or inspect.iscoroutinefunction(getattr(env, name, None))


def async_method(env: Any, name: str) -> Any:
    """``env``'s ``<name>_async`` (OpenEnv's ``reset_async``/``step_async``) if a coroutine of its own, else ``None``.

    openenv-core's ``Environment`` base defines both as coroutines that only
    call the blocking ``reset``/``step``: the released server awaits them only
    where a subclass overrides them, and so does this one.
    """
    alt = getattr(env, name + "_async", None)
    if alt is None:
        return None
    return alt if _own_coroutine(alt, getattr(alt, "__func__", alt)) else None


#: the modules of openenv-core's ``Environment`` (``openenv_core``: its releases before the ``openenv`` namespace)
_CORE_MODULES = ("openenv.core.", "openenv_core.")


def _own_coroutine(alt: Any, func: Any) -> bool:
    """Whether ``alt`` is a coroutine function other than openenv-core's default ``reset_async``/``step_async``."""
    if not inspect.iscoroutinefunction(alt):
        return False
    module = getattr(func, "__module__", None) or ""
    return not (
        module.startswith(_CORE_MODULES)
        and getattr(func, "__qualname__", None) in ("Environment.reset_async", "Environment.step_async")
    )


def _failed(what: str, exc: Exception) -> str:
    """The reply when the environment's ``what`` (or its result's frame) raised ``exc``: the session goes on.

    Called in the ``except`` block (the traceback is logged at ``INFO``).
    """
    if isinstance(exc, ValidationError):
        return _validation_frame(exc)
    logger.info("%s raised", what, exc_info=True)
    return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))


def _reset(env: Any, data: dict[str, Any]) -> Generator[EnvCall, Any, str]:
    try:
        observation = yield EnvCall("reset", None, data)
        return _observation_frame(observation)
    except Exception as exc:
        return _failed("reset", exc)


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
    except Exception as exc:
        return _failed("step", exc)


def _state(env: Any) -> str:
    try:
        return _state_frame(env.state)
    except Exception as exc:
        return _failed("state", exc)
