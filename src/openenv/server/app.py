"""A small OpenEnv-protocol server built on websockets' threading server.

:class:`EnvServer` serves one environment factory on one port, speaking the
OpenEnv wire protocol as the released servers do (``openenv`` 0.10.0 and
``openenv-core`` 0.3.0): the same frames, error codes, error messages and
step-result shape (0.10 flavour: ``metadata`` stays inside the observation and
is copied to the top level only when it is non-empty). It needs no Docker, no
ASGI stack and no network access, which makes it the project's embedded
default and the real server the client tests talk to.

What it serves
--------------

* ``/ws`` (WebSocket, exact path; the query string is ignored): one environment
  instance per connection, created by the factory after a capacity slot has
  been reserved. Frames ``reset``, ``step``, ``state``, ``close`` and ``mcp``
  (JSON-RPC ``tools/list``/``tools/call`` for environments with
  :func:`~openenv.server.tool` methods, see :mod:`openenv.server.tools`;
  ``-32603 Environment does not support MCP`` for the others). One reply per request, in order; each
  connection runs in its own
  thread (websockets' own), so a slow ``step`` blocks only its session while
  keepalive pings are still answered.
* HTTP ``GET /health``, ``/metadata``, ``/schema`` and ``/state`` (stateless:
  each ``/state`` call creates, reads and closes a fresh instance), answered
  from websockets' ``process_request`` hook with JSON bodies.

Differences from the reference server
-------------------------------------

* **No HTTP POST endpoints** (``/reset``, ``/step``, ``/mcp``): websockets'
  HTTP parser refuses request bodies, so such requests are dropped without a
  response; a body-less ``POST`` to those paths gets ``501``. Use ``/ws``
  (which is all the reference clients use anyway). Older websockets
  releases, whose parser accepts only ``GET``, drop every ``POST`` without
  a response.
* Other non-``GET`` methods on the ``GET`` routes give ``405``, unknown paths
  ``404 {"detail":"Not Found"}``; a plain (non-upgrade) ``GET /ws`` gives
  ``404`` like the reference; a WebSocket upgrade to any path other than
  ``/ws`` is refused with ``403``.
* A frame that is valid JSON but not an object gets a ``VALIDATION_ERROR``
  (``dict_type``) and the session continues (the reference fails the session
  with a ``SESSION_ERROR``).
* ``/ws?session_id=`` (MCP session attach), WebSocket ``/mcp``, the task API
  and the web interface are not implemented.
* :meth:`EnvServer.stop` closes open sessions with code ``1012`` (service
  restart), as uvicorn does on shutdown.

Inbound messages larger than ``max_message_size`` (16 MiB by default, like
uvicorn) make websockets close the connection with code ``1009``.
"""

from __future__ import annotations

import email.utils
import http
import json
import logging
import signal
import threading
import uuid
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection
from websockets.sync.server import serve as _ws_serve

from openenv._core.errors import ErrorCode
from openenv._core.models import Action, Observation, State

from .environment import Environment, filter_kwargs
from .tools import handle_rpc, is_mcp_action, step_observation

__all__ = ["EnvServer", "serve", "step_result", "EnvFactory", "DEFAULT_MAX_MESSAGE_SIZE"]

logger = logging.getLogger("openenv.server")

#: An :class:`Environment` subclass, or any zero-argument callable returning an environment.
EnvFactory = type[Environment[Any, Any, Any]] | Callable[[], Environment[Any, Any, Any]]

#: Largest inbound WebSocket message accepted by default (uvicorn's ``ws_max_size``).
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

_WS_PATH = "/ws"
_GET_ROUTES = frozenset({"/health", "/metadata", "/schema", "/state"})
_POST_ROUTES = frozenset({"/reset", "/step", "/mcp"})


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


def _strict_default(obj: Any) -> Any:
    """``json.dumps`` fallback for observation/state values (pydantic's JSON rules)."""
    return to_jsonable_python(obj)


def _lenient_default(obj: Any) -> Any:
    """``json.dumps`` fallback for error details: never fails."""
    try:
        return to_jsonable_python(obj)
    except Exception:
        return str(obj)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=_strict_default)


def _error_frame(code: str, message: str, **extra: Any) -> str:
    data: dict[str, Any] = {"message": message, "code": code}
    data.update(extra)
    return json.dumps(
        {"type": "error", "data": data},
        separators=(",", ":"),
        ensure_ascii=False,
        default=_lenient_default,
    )


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


def _observation_frame(observation: Any) -> str:
    return '{"type":"observation","data":' + _dumps(step_result(observation)) + "}"


def _state_frame(state: Any) -> str:
    data = state.model_dump() if isinstance(state, BaseModel) else dict(state)
    return '{"type":"state","data":' + _dumps(data) + "}"


def _http_response(status: int, body: bytes, content_type: str) -> Response:
    st = http.HTTPStatus(status)
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
        ]
    )
    return Response(st.value, st.phrase, headers, body)


def _json_response(status: int, payload: Any) -> Response:
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=_strict_default)
    return _http_response(status, body.encode("utf-8"), "application/json")


def _is_upgrade(request: Request) -> bool:
    upgrade = request.headers.get("Upgrade", "")
    return "websocket" in upgrade.lower()


# --------------------------------- server ---------------------------------- #


class EnvServer:
    """An OpenEnv-protocol server for one environment factory.

    Use it as a context manager, which starts and stops it::

        from openenv.server import EnvServer
        from openenv.server.echo import EchoEnvironment

        with EnvServer(EchoEnvironment) as srv:
            print(srv.url)   # http://127.0.0.1:<ephemeral port>

    Args:
        factory: an :class:`Environment` subclass, or a zero-argument callable
            returning an environment. It is called once per ``/ws`` session
            (after a capacity slot was reserved) and once per ``GET /state``.
        host: interface to bind; keep the default ``127.0.0.1`` unless you
            mean to expose the server.
        port: TCP port; ``0`` picks a free ephemeral port, known as
            :attr:`port` after :meth:`start`.
        max_sessions: the number of concurrent ``/ws`` sessions (the
            protocol's ``max_concurrent_envs``; default 1, like the
            reference). Values above 1 are refused for an environment class
            whose ``SUPPORTS_CONCURRENT_SESSIONS`` is false (checked when
            ``factory`` is a class).
        max_message_size: the largest inbound WebSocket message in bytes;
            larger ones close the connection with code 1009.
        name: the name reported by ``GET /metadata`` (default: the
            environment class name).
        ping_interval: seconds between keepalive pings (``None``: off).
        ping_timeout: seconds to wait for a pong before closing with 1011.
    """

    def __init__(
        self,
        factory: EnvFactory,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_sessions: int = 1,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        name: str | None = None,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
    ) -> None:
        if not callable(factory):
            raise TypeError(f"factory must be an Environment class or a callable, not {factory!r}")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        if max_message_size < 1:
            raise ValueError(f"max_message_size must be positive, not {max_message_size}")
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
        self._factory: Callable[[], Any] = factory
        self._factory_name: str = getattr(factory, "__name__", None) or str(factory)
        self._env_cls: type | None = factory if isinstance(factory, type) else None
        self._host = host
        self._port = port
        self._max_sessions = max_sessions
        self._max_message_size = max_message_size
        self._name = name
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout

        self._lock = threading.Lock()  # guards _active and the cached class/schema
        self._active = 0
        self._schema: dict[str, Any] | None = None
        self._lifecycle = threading.Lock()  # serialises start()/stop()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ info

    @property
    def host(self) -> str:
        """The interface the server binds to."""
        return self._host

    @property
    def port(self) -> int:
        """The TCP port; the real one once started (``0`` before, if ephemeral)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://<host>:<port>``, the base URL to give a client."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def ws_url(self) -> str:
        """``ws://<host>:<port>/ws``, the session endpoint."""
        return "ws" + self.url[4:] + _WS_PATH

    @property
    def max_sessions(self) -> int:
        """The session capacity."""
        return self._max_sessions

    @property
    def active_sessions(self) -> int:
        """The number of ``/ws`` sessions holding a capacity slot right now."""
        with self._lock:
            return self._active

    @property
    def running(self) -> bool:
        """Whether the server is started and not stopped."""
        return self._server is not None

    @property
    def name(self) -> str:
        """The environment's name (``name`` argument, else its class name).

        For a factory that is not a class, the class is found by creating (and
        closing) one instance, once.
        """
        return self._name or self._env_class().__name__

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        sessions = f"{self.active_sessions}/{self._max_sessions}"
        return f"<EnvServer {self._factory_name} {self.url} {state} sessions={sessions}>"

    # ------------------------------------------------------------- lifecycle

    def start(self) -> EnvServer:
        """Bind and serve in a background daemon thread; return ``self``.

        Idempotent while running. After :meth:`stop`, ``start()`` serves again
        on the same port (the one bound first, when ``port`` was 0).
        """
        with self._lifecycle:
            if self._server is not None:
                return self
            server = _ws_serve(
                self._handle_session,
                self._host,
                self._port,
                process_request=self._process_request,
                max_size=self._max_message_size,
                ping_interval=self._ping_interval,
                ping_timeout=self._ping_timeout,
            )
            self._port = server.socket.getsockname()[1]
            thread = threading.Thread(target=server.serve_forever, name=f"openenv-server-{self._port}", daemon=True)
            self._server, self._thread = server, thread
            thread.start()
        logger.info("serving %s on %s (max_sessions=%d)", self._factory_name, self.url, self._max_sessions)
        return self

    def stop(self) -> None:
        """Stop accepting connections, close every open session, and wait.

        Open ``/ws`` connections are closed with code 1012 (service restart),
        so clients see the drop; each session's environment is closed and its
        slot freed. Returns when every connection thread has finished (a
        ``step`` still running is waited for). Idempotent. Do not call it from
        inside an environment.
        """
        with self._lifecycle:
            server, thread = self._server, self._thread
            self._server = self._thread = None
            if server is None:
                return
            server.shutdown(close_connections=True, code=CloseCode.SERVICE_RESTART, reason="server stopping")
            if thread is not None:
                thread.join()
        logger.info("stopped %s on %s", self._factory_name, self.url)

    def serve_forever(self, on_ready: Callable[[EnvServer], None] | None = None) -> None:
        """Start (if needed) and block until interrupted, then stop.

        Ctrl-C (and, in the main thread, SIGTERM) stops the server cleanly.

        Args:
            on_ready: called with the server once it is listening.
        """
        self.start()
        thread = self._thread
        previous: Any = None
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            if on_ready is not None:
                on_ready(self)
            while thread is not None and thread.is_alive():
                thread.join(1.0)
        except KeyboardInterrupt:
            logger.info("interrupted; stopping")
        finally:
            try:
                self.stop()
            finally:
                if in_main:
                    signal.signal(signal.SIGTERM, previous)

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ HTTP

    def _env_class(self) -> type:
        cls = self._env_cls
        if cls is None:
            env = self._factory()
            try:
                cls = type(env)
            finally:
                _close_quietly(env)
            self._env_cls = cls
        return cls

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """websockets' handshake hook: accept ``/ws`` upgrades, answer HTTP requests."""
        path = request.path.split("?", 1)[0]
        if _is_upgrade(request):
            if path == _WS_PATH:
                return None  # perform the WebSocket handshake
            return _http_response(403, b"Forbidden", "text/plain; charset=utf-8")
        try:
            if request.method != "GET":
                if path in _GET_ROUTES:
                    response = _json_response(405, {"detail": "Method Not Allowed"})
                    response.headers["Allow"] = "GET"
                    return response
                if path in _POST_ROUTES:
                    return _json_response(
                        501,
                        {"detail": f"{request.method} {path} is not supported by this server; use the /ws WebSocket"},
                    )
                return _json_response(404, {"detail": "Not Found"})
            if path == "/health":
                return _json_response(200, {"status": "healthy"})
            if path == "/metadata":
                return _json_response(200, self._metadata())
            if path == "/schema":
                return _json_response(200, self._schemas())
            if path == "/state":
                return _json_response(200, self._fresh_state())
            if path in _POST_ROUTES:
                response = _json_response(405, {"detail": "Method Not Allowed"})
                response.headers["Allow"] = "POST"
                return response
            return _json_response(404, {"detail": "Not Found"})
        except Exception:
            logger.exception("GET %s failed", path)
            return _http_response(500, b"Internal Server Error", "text/plain; charset=utf-8")

    def _metadata(self) -> dict[str, Any]:
        name = self.name
        return {
            "name": name,
            "description": f"{name} environment",
            "readme_content": None,
            "version": "1.0.0",
            "author": None,
            "documentation_url": None,
        }

    def _schemas(self) -> dict[str, Any]:
        schema = self._schema
        if schema is None:
            cls = self._env_class()
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

    def _fresh_state(self) -> dict[str, Any]:
        env = self._factory()
        try:
            state = env.state
            fields = getattr(type(env), "state_type", State).model_fields
            dumped = state.model_dump() if isinstance(state, BaseModel) else dict(state)
            return {k: v for k, v in dumped.items() if k in fields}
        finally:
            _close_quietly(env)

    # ------------------------------------------------------------- WebSocket

    def _handle_session(self, connection: ServerConnection) -> None:
        """One ``/ws`` connection: reserve a slot, create the env, run the loop, clean up."""
        with self._lock:
            active = self._active
            full = active >= self._max_sessions
            if not full:
                self._active += 1
        if full:
            logger.info("refusing a session: at capacity (%d/%d)", active, self._max_sessions)
            _send(
                connection,
                _error_frame(
                    ErrorCode.CAPACITY_REACHED,
                    f"Server at capacity: {active}/{self._max_sessions} sessions active. "
                    "Cannot accept new connections.",
                    active_sessions=active,
                    max_sessions=self._max_sessions,
                ),
            )
            return  # websockets closes with 1000
        try:
            try:
                env = self._factory()
            except Exception:
                logger.exception("environment factory %r failed", self._factory_name)
                _send(
                    connection,
                    _error_frame(
                        ErrorCode.FACTORY_ERROR,
                        f"Environment factory '{self._factory_name}' failed to create instance.",
                        factory_name=self._factory_name,
                    ),
                )
                return
            peer = _peer(connection)
            logger.debug("session opened (%s)", peer)
            try:
                self._session_loop(connection, env, str(uuid.uuid4()))
            finally:
                _close_quietly(env)
                logger.debug("session closed (%s)", peer)
        finally:
            with self._lock:
                self._active -= 1

    def _session_loop(self, connection: ServerConnection, env: Any, session_id: str = "") -> None:
        while True:
            try:
                raw = connection.recv()
            except ConnectionClosed:
                return
            if not isinstance(raw, str):
                # The reference server fails its receive_text() with KeyError('text').
                _send(connection, _error_frame(ErrorCode.SESSION_ERROR, "'text'"))
                return
            try:
                reply, keep_open = self._dispatch(env, raw, session_id)
            except Exception as exc:  # a bug here, not in the environment
                logger.exception("session failed")
                _send(connection, _error_frame(ErrorCode.SESSION_ERROR, str(exc)))
                return
            if reply is not None and not _send(connection, reply):
                return
            if not keep_open:
                return

    def _dispatch(self, env: Any, raw: str, session_id: str = "") -> tuple[str | None, bool]:
        """Handle one text frame: (reply frame or ``None``, keep the session open)."""
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
        clean = len(msg) <= 2 and all(k == "type" or k == "data" for k in msg)
        data = msg.get("data")

        if mtype == "step":
            if not (clean and isinstance(data, dict)):
                return _envelope_error(_DataMessage, msg), True
            return self._step(env, data), True
        if mtype == "reset":
            if not has_data:
                data = {}
            if not (clean and isinstance(data, dict)):
                return _envelope_error(_ResetMessage, msg), True
            return self._reset(env, data), True
        if mtype == "state":
            if not clean or has_data:
                return _envelope_error(_BareMessage, msg), True
            return self._state(env), True
        if mtype == "close":
            if not clean or has_data:
                return _envelope_error(_BareMessage, msg), True
            return None, False
        if mtype == "mcp":
            if not (clean and isinstance(data, dict)):
                return _envelope_error(_DataMessage, msg), True
            return self._mcp(env, data, session_id), True
        return _error_frame(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {mtype}"), True

    def _reset(self, env: Any, data: dict[str, Any]) -> str:
        try:
            kwargs = filter_kwargs(env.reset, data)
            return _observation_frame(env.reset(**kwargs))
        except ValidationError as exc:
            return _validation_frame(exc)
        except Exception as exc:
            logger.info("reset raised", exc_info=True)
            return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))

    def _step(self, env: Any, data: dict[str, Any]) -> str:
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
            return _observation_frame(env.step(action))
        except ValidationError as exc:
            return _validation_frame(exc)
        except Exception as exc:
            logger.info("step raised", exc_info=True)
            return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))

    def _state(self, env: Any) -> str:
        try:
            return _state_frame(env.state)
        except ValidationError as exc:
            return _validation_frame(exc)
        except Exception as exc:
            logger.info("state raised", exc_info=True)
            return _error_frame(ErrorCode.EXECUTION_ERROR, str(exc))

    def _mcp(self, env: Any, request: dict[str, Any], session_id: str = "") -> str:
        """Answer an ``mcp`` frame (JSON-RPC 2.0) against the session's environment."""
        response = handle_rpc(env, request, session_id)
        return '{"type":"mcp","data":' + _dumps(response) + "}"


def _envelope_error(model: type[_Message], msg: dict[str, Any]) -> str:
    """The ``VALIDATION_ERROR`` frame pydantic gives for an invalid envelope."""
    try:
        model.model_validate(msg)
    except ValidationError as exc:
        return _validation_frame(exc)
    # Unreachable when the hand-written checks mirror the models.
    return _error_frame(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=[])


def _send(connection: ServerConnection, frame: str) -> bool:
    """Send one text frame; ``False`` if the connection is gone."""
    try:
        payload = frame.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from the client's JSON: re-encode as ASCII escapes
        payload = json.dumps(json.loads(frame), separators=(",", ":")).encode("ascii")
    try:
        connection.send(payload, text=True)
    except ConnectionClosed:
        return False
    return True


def _peer(connection: ServerConnection) -> str:
    try:
        return str(connection.remote_address)
    except OSError:  # the socket is already closed
        return "?"


def _close_quietly(env: Any) -> None:
    close = getattr(env, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception:
        logger.exception("environment close() raised")


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve(
    factory: EnvFactory,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 1,
    *,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    name: str | None = None,
    on_ready: Callable[[EnvServer], None] | None = None,
) -> None:
    """Serve ``factory`` until interrupted (Ctrl-C or SIGTERM); a blocking convenience.

    Args:
        factory: an :class:`Environment` subclass or a zero-argument callable.
        host: interface to bind.
        port: TCP port (``0``: ephemeral).
        max_sessions: concurrent ``/ws`` sessions.
        max_message_size: largest inbound WebSocket message, in bytes.
        name: the name ``/metadata`` reports.
        on_ready: called with the :class:`EnvServer` once it is listening.
    """
    EnvServer(
        factory,
        host=host,
        port=port,
        max_sessions=max_sessions,
        max_message_size=max_message_size,
        name=name,
    ).serve_forever(on_ready=on_ready)
