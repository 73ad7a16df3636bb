"""The OpenEnv server protocol, without I/O: shared by both transports.

`EnvProtocol` holds what one served environment factory needs whatever
carries the bytes: the capacity accounting, the table of live sessions (for
``openenv/session/create`` and ``/ws?session_id=`` attach), and the HTTP
routes as plain functions returning an `HttpReply`.  A `Session`
is one environment instance: text frames in (`Session.handle()`), reply
frames out.  Nothing here opens a socket, starts a thread or awaits.

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
import math
import threading
import uuid
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import Executor
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

from openenv._core.errors import ErrorCode
from openenv._core.models import Action, Observation, State

from .environment import Environment, filter_kwargs
from .tools import handle_rpc, is_mcp_action, step_observation

__all__ = [
    "EnvProtocol",
    "Session",
    "EnvCall",
    "runs_on_loop",
    "HttpReply",
    "EnvFactory",
    "step_result",
    "http_step_result",
    "json_reply",
]

logger = logging.getLogger("openenv.server")

T = TypeVar("T")

#: An [`Environment`][openenv.server.Environment] subclass, or any zero-argument callable returning an environment.
EnvFactory = type[Environment[Any, Any, Any]] | Callable[[], Environment[Any, Any, Any]]

WS_PATH = "/ws"
GET_ROUTES = frozenset({"/health", "/metadata", "/schema", "/state"})
POST_ROUTES = frozenset({"/reset", "/step", "/mcp"})


# --------------------------------------------------------------------------- #
# Envelope models: only used to produce pydantic-style errors for bad frames. #
# The fast path checks envelopes by hand.                                      #
# --------------------------------------------------------------------------- #


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str


class _ResetMessage(_Message):
    data: dict[str, Any] = Field(default_factory=dict)


class _DataMessage(_Message):  # step, mcp
    data: dict[str, Any]


class _BareMessage(_Message):  # state, close
    pass


# ------------------------------ serialisation ------------------------------ #
#
# Everything the server sends is strict JSON (RFC 8259): ``allow_nan=False``.
# Observations and states that hold NaN/Infinity are an environment bug and
# give an ``EXECUTION_ERROR``; error details (which echo the client's input,
# and Python's ``json`` accepts ``NaN`` on input) are sanitised instead.


def _strict_default(obj: Any) -> Any:
    """``json.dumps`` fallback for observation/state values (pydantic's JSON rules)."""
    return to_jsonable_python(obj)


#: What ``_dumps`` encodes with: made once (``json.dumps`` with these arguments builds one per call).
_STRICT_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_strict_default)


def _dumps(obj: Any) -> str:
    """Strict JSON; raises ``ValueError`` for non-finite floats, ``TypeError``-likes for other values."""
    return _STRICT_ENCODER.encode(obj)


_MAX_DETAIL_DEPTH = 32
_MAX_INT_BITS = 4096  # ~1233 digits; CPython refuses to print ints of more than 4300 digits


def _float_text(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _jsonable(obj: Any, depth: int = 0) -> Any:
    """Error details as strict-JSON-able values; never raises.

    Non-finite floats become the strings ``"NaN"``, ``"Infinity"`` and
    ``"-Infinity"``; structures deeper than a limit, huge integers and values
    that have no JSON form become short strings.
    """
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, int):
        return obj if obj.bit_length() <= _MAX_INT_BITS else f"<int of {obj.bit_length()} bits>"
    if isinstance(obj, float):
        return _float_text(obj)
    if depth >= _MAX_DETAIL_DEPTH:
        return "<nested too deep>"
    if isinstance(obj, Mapping):
        return {_key_text(k): _jsonable(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in obj]
    try:
        converted = to_jsonable_python(obj)
    except Exception:
        return _safe_str(obj)
    if isinstance(converted, (dict, list, tuple, str, int, float)) or converted is None:
        return _jsonable(converted, depth + 1)
    return _safe_str(obj)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return str(_float_text(key))
    return _safe_str(key)


def _safe_str(obj: Any) -> str:
    try:
        return str(obj)
    except Exception:
        return f"<{type(obj).__name__}>"


def _error_frame(code: str, message: str, **extra: Any) -> str:
    data: dict[str, Any] = {"message": message, "code": code}
    data.update(extra)
    frame = {"type": "error", "data": _jsonable(data)}
    try:
        return json.dumps(frame, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):  # never expected: _jsonable makes it safe
        fallback = {"type": "error", "data": {"message": _safe_str(message), "code": code}}
        return json.dumps(fallback, separators=(",", ":"), ensure_ascii=True)


def _validation_frame(exc: ValidationError) -> str:
    return _error_frame(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=exc.errors(include_url=False))


def step_result(observation: Any) -> dict[str, Any]:
    """Turn an observation into the wire step result (0.10 ``/ws`` flavour).

    ``done`` and ``reward`` are lifted out of the observation to the top level;
    ``metadata`` stays in the observation and is copied to the top level only
    when it is non-empty.
    """
    if isinstance(observation, BaseModel):
        obs = observation.model_dump()
    elif isinstance(observation, Mapping):
        obs = dict(observation)
    else:
        raise TypeError(f"environment returned {type(observation).__name__}, not an Observation")
    reward = obs.pop("reward", None)
    done = obs.pop("done", False)
    result: dict[str, Any] = {"observation": obs, "reward": reward, "done": done}
    metadata = obs.get("metadata")
    if metadata:
        result["metadata"] = metadata
    return result


#: The keys a frame may have; anything else is refused as pydantic's ``extra="forbid"`` would.
_ENVELOPE_KEYS = frozenset({"type", "data"})


class _Unsendable(Exception):
    """A reply that has no strict-JSON form (NaN, Infinity, an unserialisable value)."""


def _reply(kind: str, what: str, payload: Any) -> str:
    try:
        body = _dumps(payload)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _Unsendable(f"the environment's {what} cannot be sent as strict JSON: {exc}") from None
    return '{"type":"' + kind + '","data":' + body + "}"


def _observation_frame(observation: Any) -> str:
    return _reply("observation", "observation", step_result(observation))


def _state_frame(state: Any) -> str:
    data = state.model_dump() if isinstance(state, BaseModel) else dict(state)
    return _reply("state", "state", data)


def _envelope_error(model: type[_Message], msg: dict[str, Any]) -> str:
    """The ``VALIDATION_ERROR`` frame pydantic gives for an invalid envelope."""
    try:
        model.model_validate(msg)
    except ValidationError as exc:
        return _validation_frame(exc)
    # Unreachable when the hand-written checks mirror the models.
    return _error_frame(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=[])


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


def _finite_reward(value: Any) -> Any:
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, (bool, int)):
        return float(value)
    return value


def http_step_result(observation: Any) -> dict[str, Any]:
    """The step result of HTTP ``/reset`` and ``/step`` (0.10's response model).

    As `step_result()`, but the top-level ``metadata`` is always there
    (``null`` when empty) and ``reward`` is a float (or ``null``).
    """
    result = step_result(observation)
    result["reward"] = _finite_reward(result["reward"])
    result["metadata"] = result.get("metadata") or None
    return result


# ----------------------------------------------------------------- HTTP replies


class HttpReply(NamedTuple):
    """An HTTP answer: status, body bytes, content type and extra headers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_reply(status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> HttpReply:
    """A strict-JSON reply (a NaN in the payload raises ``ValueError``)."""
    return HttpReply(status, _dumps(payload).encode("utf-8", "backslashreplace"), "application/json", headers)


_INTERNAL_ERROR = HttpReply(500, b"Internal Server Error", "text/plain; charset=utf-8")
NOT_FOUND = HttpReply(404, b'{"detail":"Not Found"}')


def _unprocessable(errors: list[dict[str, Any]]) -> HttpReply:
    return json_reply(422, {"detail": _jsonable(errors)})


def _body_errors(exc: ValidationError, prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{**err, "loc": [*prefix, *err["loc"]]} for err in exc.errors(include_url=False)]


class _ResetRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)


class _StepRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    action: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


def _validated_body(
    body: bytes, model: type[BaseModel], *, optional: bool
) -> tuple[dict[str, Any] | None, HttpReply | None]:
    """The JSON object of a request body checked against ``model``, or the ``422`` FastAPI gives."""
    data, error = _json_body(body, optional=optional)
    if error is not None or data is None:
        return None, error
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return None, _unprocessable(_body_errors(exc, ("body",)))
    return data, None


def _json_body(body: bytes, *, optional: bool) -> tuple[dict[str, Any] | None, HttpReply | None]:
    """The JSON object of a request body, or the ``422`` FastAPI gives for it."""
    if not body.strip():
        if optional:
            return {}, None
        return None, _unprocessable([{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}])
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", 0)
        error = {"type": "json_invalid", "loc": ["body", pos], "msg": "JSON decode error", "input": {}}
        return None, _unprocessable([{**error, "ctx": {"error": getattr(exc, "msg", str(exc))}}])
    if not isinstance(data, dict):
        msg = "Input should be a valid dictionary or object to extract fields from"
        return None, _unprocessable([{"type": "model_attributes_type", "loc": ["body"], "msg": msg, "input": data}])
    return data, None


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
            frames = self._dispatch(raw)
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
            frames = self._dispatch(raw)
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

    def _dispatch(self, raw: str) -> Generator[EnvCall, Any, tuple[str | None, bool]]:
        try:
            msg = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return _error_frame(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}"), True
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


def _rpc_text(response: dict[str, Any]) -> str:
    """A JSON-RPC response as strict JSON (an unsendable result becomes a ``-32603`` error)."""
    try:
        return _dumps(response)
    except (ValueError, TypeError, RecursionError) as exc:
        error = {"code": -32603, "message": f"the environment's tool result cannot be sent as strict JSON: {exc}"}
        return _dumps({"jsonrpc": "2.0", "id": _jsonable(response.get("id")), "error": error})


def _mcp_frame(env: Any, request: dict[str, Any], session_id: str) -> str:
    """Answer an ``mcp`` frame (JSON-RPC 2.0) against the session's environment."""
    return '{"type":"mcp","data":' + _rpc_text(handle_rpc(env, request, session_id)) + "}"


def _rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}


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

    Raises:
        TypeError: ``factory`` is not callable.
        ValueError: ``max_sessions`` is below 1, or above 1 for a class whose
            ``SUPPORTS_CONCURRENT_SESSIONS`` is false.
    """

    def __init__(self, factory: EnvFactory, *, max_sessions: int = 1, name: str | None = None) -> None:
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
        try:
            env = self.factory()
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            self.release_slot()
            return None, self._factory_error()
        session = Session(self, env, str(uuid.uuid4()), owner="ws")
        with self._lock:
            self._sessions[session.session_id] = session
        return session, None

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

    # -------------------------------------------------------- GET routes

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

    def http_get(self, path: str) -> HttpReply:
        """``GET /health``, ``/metadata``, ``/schema`` or ``/state``; ``404`` for any other path."""
        try:
            if path == "/health":
                return json_reply(200, {"status": "healthy"})
            if path == "/metadata":
                return json_reply(200, self.metadata())
            if path == "/schema":
                return json_reply(200, self.schemas())
            if path == "/state":
                return json_reply(200, self.fresh_state())
        except Exception:
            logger.exception("GET %s failed", path)
            return _INTERNAL_ERROR
        return NOT_FOUND

    # ------------------------------------------------------- POST routes

    def http_reset(self, body: bytes) -> HttpReply:
        """``POST /reset``: a fresh instance, reset with the body's keys (those it accepts), closed."""
        data, error = _validated_body(body, _ResetRequest, optional=True)
        if data is None:
            return error or _INTERNAL_ERROR
        try:
            env = self.factory()
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            return _INTERNAL_ERROR
        try:
            return json_reply(200, http_step_result(env.reset(**filter_kwargs(env.reset, data))))
        except Exception:
            logger.exception("POST /reset failed")
            return _INTERNAL_ERROR
        finally:
            _close_quietly(env)

    def http_step(self, body: bytes) -> HttpReply:
        """``POST /step``: a fresh (never reset) instance runs ``{"action": ...}``, then is closed."""
        data, error = _validated_body(body, _StepRequest, optional=False)
        if data is None:
            return error or _INTERNAL_ERROR
        action_data: dict[str, Any] = data["action"]
        extra = {k: v for k, v in data.items() if k != "action"}
        try:
            env = self.factory()
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            return _INTERNAL_ERROR
        try:
            if is_mcp_action(env, action_data):
                observation = step_observation(env, action_data)
            else:
                action_type: type[BaseModel] = getattr(env, "action_type", Action)
                try:
                    action = action_type.model_validate(action_data)
                except ValidationError as exc:
                    return _unprocessable([dict(err) for err in exc.errors(include_url=False)])
                observation = env.step(action, **filter_kwargs(env.step, extra))
            return json_reply(200, http_step_result(observation))
        except Exception:
            logger.exception("POST /step failed")
            return _INTERNAL_ERROR
        finally:
            _close_quietly(env)

    def http_mcp(self, body: bytes) -> HttpReply:
        """``POST /mcp``: one JSON-RPC request; always ``200`` with a JSON-RPC response.

        Without ``params.session_id`` a throw-away instance answers; with it,
        that session's environment (through `Session.run()`).
        ``openenv/session/create`` makes a session (it takes a capacity slot),
        ``openenv/session/close`` ends one.
        """
        return HttpReply(200, self._rpc(body).encode("utf-8", "backslashreplace"))

    def _rpc(self, body: bytes) -> str:
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return _rpc_text(_rpc_error(None, -32700, "Parse error"))
        if not isinstance(request, dict):
            return _rpc_text(_rpc_error(None, -32600, "Invalid request: not a JSON object"))
        request_id = request.get("id")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            request_id = None
        params = request.get("params", {})
        method = request.get("method")
        if not isinstance(params, dict):
            return _rpc_text(handle_rpc(None, request, ""))  # the -32600 it gives
        if method == "openenv/session/create" and request.get("jsonrpc") == "2.0":
            return _rpc_text(self._create(request_id))
        target = params.get("session_id")
        if method == "openenv/session/close" and request.get("jsonrpc") == "2.0":
            return _rpc_text(self._close(request_id, target))
        if target is not None:
            session = self._use(target)
            if session is None:
                return _rpc_text(_rpc_error(request_id, -32602, f"Unknown session_id: {target}"))
            sid = session.session_id
            try:
                return _rpc_text(session.run(lambda: handle_rpc(session.env, request, sid)))
            finally:
                with self._lock:
                    session.busy -= 1
                    session.touched = True
        try:
            env = self.factory()
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            return _rpc_text(
                _rpc_error(request_id, -32000, "Failed to create environment", {"factory_name": self.factory_name})
            )
        try:
            return _rpc_text(handle_rpc(env, request, ""))
        finally:
            _close_quietly(env)

    def _use(self, target: Any) -> Session | None:
        """The live session ``target`` names, marked busy (so no sweep ends it meanwhile), or ``None``."""
        if not isinstance(target, str):
            return None
        with self._lock:
            session = self._sessions.get(target)
            if session is None or session.ended:
                return None
            session.busy += 1
            return session

    def _create(self, request_id: Any) -> dict[str, Any]:
        if not self.reserve_slot():
            active = self.active_sessions
            message = f"Server at capacity: {active}/{self.max_sessions} sessions active. Cannot create session."
            data = {"active_sessions": active, "max_sessions": self.max_sessions}
            return _rpc_error(request_id, -32000, message, data)
        try:
            env = self.factory()
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            self.release_slot()
            message = f"Environment factory '{self.factory_name}' failed to create instance."
            return _rpc_error(request_id, -32000, message, {"factory_name": self.factory_name})
        session = Session(self, env, str(uuid.uuid4()), owner="http")
        session.executor = self.session_executor(session)
        with self._lock:
            self._sessions[session.session_id] = session
        return {"jsonrpc": "2.0", "id": request_id, "result": {"session_id": session.session_id}}

    def _close(self, request_id: Any, target: Any) -> dict[str, Any]:
        if not target:
            return _rpc_error(request_id, -32602, "Invalid params - 'session_id' is required")
        session = self.lookup(target) if isinstance(target, str) else None
        if session is None:
            return _rpc_error(request_id, -32602, f"Unknown session_id: {target}")
        if session.owner == "ws":
            return _rpc_error(request_id, -32600, "Cannot close active WebSocket-managed session via MCP method")
        with self._lock:
            if session.attached:
                session.closing = True
                result = {"session_id": target, "closed": False, "closing": True}
                return {"jsonrpc": "2.0", "id": request_id, "result": result}
        self.end_session(session)
        return {"jsonrpc": "2.0", "id": request_id, "result": {"session_id": target, "closed": True}}

    #: Makes the executor of an HTTP-created session (``None``: calls run under a lock in the caller's thread).
    #: A transport may replace it (the ASGI app gives each session its own thread).
    session_executor: Callable[[Session], Executor | None] = staticmethod(lambda session: None)
