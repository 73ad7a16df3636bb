"""OpenEnv's whole HTTP surface as an ASGI app (Starlette), for uvicorn.

`create_app()` serves an environment written on [`openenv.server`][openenv.server] the
way OpenEnv environments are deployed (``uvicorn server.app:app``, Hugging
Face Spaces, ``from_env(checkout)``):

```python
# server/app.py
from openenv.server.asgi import create_app
from my_env import MyEnvironment

app = create_app(MyEnvironment, max_sessions=4)
```

or from a shell: ``python -m openenv serve my_env:MyEnvironment --asgi``.
Needs the extra ``openenv-twin[server]`` (``starlette``, ``uvicorn``).

Served (the protocol logic is `openenv.server.protocol`, shared with
[`EnvServer`][openenv.server.EnvServer]; the routes' answers are
`openenv.server._http`'s):

* ``GET /health``, ``/metadata``, ``/schema``, ``/state`` (``/state``: a fresh
  instance, as the reference);
* ``POST /reset`` and ``POST /step`` with JSON bodies, stateless as in OpenEnv:
  each request creates an instance, uses it once and closes it (``422`` with
  FastAPI-style ``detail`` for bad bodies, ``500`` text when the environment
  raises); they do not count towards capacity;
* ``POST /mcp``: JSON-RPC 2.0 (``tools/list``, ``tools/call``,
  ``openenv/session/create``, ``openenv/session/close``; ``params.session_id``
  targets a session), always HTTP ``200``: what production-mode clients use;
* ``/ws``: the session WebSocket; ``/ws?session_id=`` attaches to a session
  made by ``openenv/session/create``.

Limits (the embedded server's, see [`EnvServer`][openenv.server.EnvServer]):

* a ``/ws`` message of more than 4096 frames (websockets' ``MAX_FRAGMENTS``)
  closes the connection with ``1009`` "too many fragments", as the embedded
  server does (under [`uvicorn_config()`][openenv.server.asgi.uvicorn_config]);
* a request body larger than ``max_body_size`` (16 MiB) gets ``413`` and the
  connection is closed; a body that ends within 1 MiB past the limit
  (``DRAIN_LIMIT``) is read and dropped first, while its parts keep coming (a
  pause of 5 s ends it, and 30 s in all), so that the ``413`` reaches the client (a connection
  closed on unread bytes is reset, and the reset can destroy the answer); one
  whose ``Content-Length`` says more gets its ``413`` unread, and a chunked one
  is cut off 1 MiB past the limit;
* a session made by ``openenv/session/create`` that nothing uses (no
  ``POST /mcp`` call on it, no attached WebSocket) for ``idle_timeout`` seconds
  is ended and its slot freed (checked every ``idle_timeout / 10`` seconds, at
  most 5 s; needs the app's lifespan, which uvicorn runs by default); a later
  call on it gets ``Unknown session_id``;
* under [`uvicorn_config()`][openenv.server.asgi.uvicorn_config] (what
  ``python -m openenv serve --asgi`` runs), a connection that has not sent a
  whole request head within ``handshake_timeout`` (10 s) is closed, and beyond
  ``max_pending`` (64) such connections new ones get ``503`` at once, so
  silent or slow sockets cannot pile up.  Plain ``uvicorn module:app`` has no
  such timeout (only ``--timeout-keep-alive`` between requests).

``/ws`` is a bare ASGI endpoint ahead of Starlette's routing and middleware:
it reads and writes the ASGI messages itself, so a frame costs only uvicorn's
work and the protocol's (no ``WebSocket`` wrapper or middleware per frame).
A blocking environment's session runs on its own worker thread, from its
construction to its ``close()`` (an environment bound to the thread that made
it works), so a slow ``step`` blocks only its session and uvicorn keeps
answering pings; one that
does not block (``async`` methods, ``reset_async``/``step_async``, or
``blocking = False``: `openenv.server.protocol.runs_on_loop`) runs on the
event loop, without a thread hop per frame (its plain methods, unless
``blocking = False``, on a thread of the session's own).  At capacity a
``/ws`` upgrade is refused with ``503`` and the ``CAPACITY_REACHED`` frame as
body when the server supports ASGI's WebSocket denial responses (uvicorn
does); otherwise the frame is sent after the handshake, then the socket is
closed (the reference server's way).  A ``/ws`` client silent for
``idle_timeout`` seconds is closed with ``1001``.  Not served: the task API,
the web interface, WebSocket ``/mcp`` and ``/harness``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import queue
import socket
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openenv._core.options import redact_logger

from . import _http
from ._http import HttpReply
from ._idle import IdleTimer, settle
from ._refusal import REFUSED_LINGER as _REFUSED_LINGER
from ._refusal import Refusal
from ._session import closes_on_loop, opens_on_loop
from ._settings import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_PENDING,
    check_count,
    check_listener,
    check_seconds,
    idle_close,
    raise_keyboard_interrupt,
)
from .protocol import EnvFactory, EnvProtocol, Session, runs_on_loop

if TYPE_CHECKING:
    import uvicorn

__all__ = ["create_app", "uvicorn_config", "serve", "DEFAULT_MAX_BODY_SIZE"]

logger = logging.getLogger("openenv.server")

T = TypeVar("T")

#: Largest request body taken by default (``POST /reset``, ``/step``, ``/mcp``): 16 MiB.
DEFAULT_MAX_BODY_SIZE = 16 * 1024 * 1024


def _response(reply: HttpReply) -> Response:
    return Response(reply.body, reply.status, headers=dict(reply.headers), media_type=reply.content_type)


def _executor(session: Session) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"openenv-session-{session.session_id[:8]}")


class _SessionThread(Executor):
    """A blocking ``/ws`` session's one thread: its environment calls, one at a time, in order.

    An `Executor` (``submit()``, for `Session.run()`), plus `call()`, which the
    session loop awaits: one ``SimpleQueue.put`` there and one
    ``call_soon_threadsafe`` back, cheaper than ``run_in_executor`` on a
    ``ThreadPoolExecutor`` (about 36 against 50 µs of CPU per call here).
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args, future = item
            if isinstance(future, concurrent.futures.Future):
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args))
                    except BaseException as exc:  # handed to the caller
                        future.set_exception(exc)
                continue
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting task
                result, error = None, exc
            try:
                self._loop.call_soon_threadsafe(settle, future, result, error)
            except RuntimeError:  # the loop is closed: nobody awaits any more
                pass

    def call(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` on the session's thread; await the returned future (on the loop) for its result."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._queue.put((fn, args, future))
        return future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((functools.partial(fn, **kwargs) if kwargs else fn, args, future))
        return future

    @property
    def name(self) -> str:
        """The thread's name (``openenv-session-<first 8 of the session id>`` once the session is made)."""
        return self._thread.name

    @name.setter
    def name(self, value: str) -> None:
        self._thread.name = value

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._queue.put(None)  # the thread ends after the calls already queued
        if wait and self._thread is not threading.current_thread():
            self._thread.join()


async def _made_on(thread: _SessionThread, protocol: EnvProtocol) -> tuple[Session | None, str | None]:
    """``protocol.open_session(reserved=True)`` run on ``thread``.

    Cancelled meanwhile (the server stops), it still waits for the factory, as
    ``run_in_threadpool`` does, then ends the session that was made and the
    thread, so neither the environment nor the slot outlives the connection.
    """
    made = thread.call(functools.partial(protocol.open_session, reserved=True))
    try:
        return await asyncio.shield(made)
    except asyncio.CancelledError:
        try:
            session, _ = await made
        except BaseException:
            session = None
        if session is not None:
            await thread.call(protocol.end_session, session)
        thread.shutdown(wait=False)
        raise


_ACCEPT: Message = {"type": "websocket.accept"}


class _App(Starlette):
    """Starlette, with ``/ws`` served by a bare ASGI app ahead of the routing and middleware (per frame: nothing)."""

    _ws: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and _route_path(scope) == "/ws":
            scope["app"] = self
            await self._ws(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path the routes match (Starlette's rule: ``path`` without a leading ``root_path``)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("/", ""):
        return path[len(root) :]
    return path


def _text(frame: str) -> str:
    try:
        frame.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from the client's JSON: re-encode as ASCII escapes
        return json.dumps(json.loads(frame), separators=(",", ":"), allow_nan=False)
    return frame


def create_app(
    factory: EnvFactory,
    *,
    max_sessions: int = 1,
    name: str | None = None,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
) -> Starlette:
    """An ASGI app serving ``factory`` over OpenEnv's HTTP and WebSocket surface.

    Args:
        factory: an [`Environment`][openenv.server.Environment] subclass, or a
            zero-argument callable returning an environment.
        max_sessions: concurrent sessions (``/ws`` connections and
            ``openenv/session/create`` sessions); default 1, like the reference.
        name: the name ``GET /metadata`` reports (default: the class name).
        idle_timeout: seconds a ``/ws`` client may stay silent before its
            socket is closed (``1001``), and an ``openenv/session/create``
            session may stay unused before it is ended; ``None``: never.
        max_body_size: the largest request body, in bytes; a larger one gets
            ``413``.

    Returns:
        A Starlette app (run it with ``uvicorn module:app``).

    Raises:
        TypeError: ``factory`` is not callable.
        ValueError: a bad ``max_sessions``, ``idle_timeout`` or ``max_body_size``.
    """
    idle = check_seconds("idle_timeout", idle_timeout)
    max_body_size = check_count("max_body_size", max_body_size, minimum=0, unit="bytes")
    protocol = EnvProtocol(factory, max_sessions=max_sessions, name=name, session_executor=_executor)

    async def get_route(request: Request) -> Response:
        return _response(await run_in_threadpool(_http.get, protocol, request.url.path))

    async def reset(request: Request) -> Response:
        body = await _read_body(request, max_body_size)
        if body is None:
            return _too_large(max_body_size)
        return _response(await run_in_threadpool(_http.reset, protocol, body))

    async def step(request: Request) -> Response:
        body = await _read_body(request, max_body_size)
        if body is None:
            return _too_large(max_body_size)
        return _response(await run_in_threadpool(_http.step, protocol, body))

    async def mcp(request: Request) -> Response:
        body = await _read_body(request, max_body_size)
        if body is None:
            return _too_large(max_body_size)
        return _response(await run_in_threadpool(_http.mcp, protocol, body))

    async def ws(scope: Scope, receive: Receive, send: Send) -> None:
        """``/ws`` as a bare ASGI app: the messages by hand, no Starlette ``WebSocket`` wrapper per frame."""
        query = scope.get("query_string", b"").decode("latin-1")
        session_id = dict(parse_qsl(query, keep_blank_values=True)).get("session_id") if query else None
        error: str | None
        if session_id:
            session, error = protocol.attach(session_id)
        else:
            if not protocol.reserve_slot():
                await _refuse(scope, receive, send, protocol)
                return
            if protocol.opens_on_loop():  # no thread hop, not even to create it
                session, error = protocol.open_session(reserved=True)
            else:
                # the factory may block: it runs on the thread that will run the session's plain methods, so an
                # environment bound to the thread that made it (a browser, a simulator) is used on that thread,
                # as the other transports and the released server do
                thread = _SessionThread("openenv-session-new")
                session, error = await _made_on(thread, protocol)
                if session is not None and not runs_on_loop(session.env):
                    session.executor = thread  # blocking: every call on the session's own thread
                elif session is not None and session.offload and not opens_on_loop(session.env):
                    # coroutines beside plain methods: those on the loop, these on the session's own thread
                    session.side = thread
                    session.offload_to = thread.call
                else:
                    thread.shutdown(wait=False)
                if session is not None:
                    thread.name = f"openenv-session-{session.session_id[:8]}"
        try:
            connected = await _accept(receive, send)
        except BaseException:
            if session is not None:
                await _release(protocol, session)
            raise
        if not connected:
            if session is not None:
                await _release(protocol, session)
            return
        if session is None:
            with contextlib.suppress(OSError, RuntimeError):  # the client is gone already
                await send({"type": "websocket.send", "text": error or ""})
                await send({"type": "websocket.close", "code": 1000, "reason": ""})
            return
        try:
            await _loop(receive, send, session, idle)
        finally:
            await _release(protocol, session)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeper = None if idle is None else asyncio.ensure_future(_expire_idle_sessions(protocol, idle))
        try:
            yield
        finally:
            if sweeper is not None:
                sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeper
            await run_in_threadpool(protocol.end_all)

    routes: list[BaseRoute] = [
        Route(path, get_route, methods=["GET"]) for path in ("/health", "/metadata", "/schema", "/state")
    ]
    routes += [
        Route("/reset", reset, methods=["POST"]),
        Route("/step", step, methods=["POST"]),
        Route("/mcp", mcp, methods=["POST"]),
    ]
    app = _App(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app._ws = ws
    app.state.protocol = protocol
    return app


#: How far past ``max_body_size`` a refused body is still read (and dropped) before the ``413``.
#: The connection is closed after a ``413``; closed with request bytes unread, the kernel resets it,
#: and a reset can destroy the ``413`` in the client's buffers before the client reads it (a client
#: then sees "connection reset" instead of the reason).  A body up to this much too large is read
#: whole, so its ``413`` arrives; a larger one is refused at once, unread (flat memory either way).
DRAIN_LIMIT = 1 << 20
#: While a refused body is drained, the longest wait for its next part: a client that stopped
#: sending (a chunked body it never ends) gets its ``413`` after this, not never.
DRAIN_PAUSE = 5.0
#: The longest a refused body is drained in all (a client that sends a byte now and then).
DRAIN_TIME = 30.0


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or ``None`` when it is larger than ``limit``.

    A refused body is drained (read and dropped) up to ``DRAIN_LIMIT`` bytes past ``limit``,
    while its parts keep coming (``DRAIN_PAUSE``); one declared larger than that is not read at all.
    """
    declared = request.headers.get("content-length", "")
    stream = request.stream()
    if declared.isdigit() and int(declared) > limit:
        expects = request.headers.get("expect", "").lower() == "100-continue"  # the body was not sent
        if not expects and int(declared) <= limit + DRAIN_LIMIT:
            await _drain(stream, 0, limit + DRAIN_LIMIT)
        return None
    body = bytearray()
    async for chunk in stream:
        body += chunk
        if len(body) > limit:
            await _drain(stream, len(body), limit + DRAIN_LIMIT)
            return None
    return bytes(body)


async def _drain(stream: AsyncIterator[bytes], read: int, most: int) -> None:
    """Read and drop ``stream`` until it ends, ``most`` bytes were read, a part takes ``DRAIN_PAUSE``,
    or ``DRAIN_TIME`` has passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_TIME
    while read <= most:
        wait = min(DRAIN_PAUSE, deadline - loop.time())
        if wait <= 0:
            return
        try:
            chunk = await asyncio.wait_for(stream.__anext__(), wait)
        except (StopAsyncIteration, asyncio.TimeoutError, ClientDisconnect):
            return
        read += len(chunk)


def _too_large(limit: int) -> Response:
    detail = f"request body too large: this server takes at most {limit} bytes"
    return JSONResponse({"detail": detail}, 413, headers={"Connection": "close"})


async def _expire_idle_sessions(protocol: EnvProtocol, idle: float) -> None:
    """End the ``openenv/session/create`` sessions unused for ``idle`` seconds, until cancelled."""
    loop = asyncio.get_running_loop()
    interval = min(max(idle / 10, 0.01), 5.0)
    while True:
        await asyncio.sleep(interval)
        for session in protocol.expire_idle(loop.time(), idle):
            try:
                await run_in_threadpool(protocol.close_ended, session)
            except Exception:  # never stop the sweeps
                logger.exception("closing idle session %s failed", session.session_id)


async def _refuse(scope: Scope, receive: Receive, send: Send, protocol: EnvProtocol) -> None:
    """At capacity: a ``503`` denial response when the server can send one, else frame-then-close."""
    if "websocket.http.response" in scope.get("extensions", {}):
        await _response(protocol.capacity_reply())(scope, receive, send)
        return
    if await _accept(receive, send):
        await send({"type": "websocket.send", "text": protocol.capacity_frame()})
        await send({"type": "websocket.close", "code": 1000, "reason": ""})


async def _accept(receive: Receive, send: Send) -> bool:
    """Complete the handshake (``websocket.connect``, then accept); ``False`` if the client left first."""
    message = await receive()
    if message["type"] != "websocket.connect":  # websocket.disconnect
        return False
    await send(_ACCEPT)
    return True


async def _release(protocol: EnvProtocol, session: Session) -> None:
    if protocol.detach(session):
        side = session.side
        if isinstance(side, _SessionThread):  # its plain methods ran on this thread: closed there, after them
            try:
                if closes_on_loop(session):  # an async close: on the loop that ran its coroutines
                    await protocol.end_session_async(session)
                else:
                    await side.call(protocol.end_session, session)
            finally:
                side.shutdown(wait=False)
        elif session.executor is None and session.owner == "ws":  # it ran on the loop: close it there
            await protocol.end_session_async(session)
        else:
            await run_in_threadpool(protocol.end_session, session)


async def _loop(receive: Receive, send: Send, session: Session, idle: float | None) -> None:
    """The session's frames until the client leaves, the session ends, or the client stays silent for ``idle`` s."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    # idle: cancel the task (only ever waiting in receive() then: the timer does not fire during a call)
    watch = None if idle is None or task is None else IdleTimer(idle, task.cancel)
    executor = session.executor
    call = executor.call if isinstance(executor, _SessionThread) else None
    handle = session.handle
    try:
        while True:
            try:
                message = await receive()
            except asyncio.CancelledError:
                if watch is None or not watch.fired:
                    raise
                if task is not None and hasattr(task, "uncancel"):  # Python 3.11+: the cancel was ours
                    task.uncancel()
                code, reason = idle_close(idle)  # type: ignore[arg-type]  # the timer runs only with an idle
                with contextlib.suppress(OSError, RuntimeError):
                    await send({"type": "websocket.close", "code": code, "reason": reason})
                return
            if watch is not None:
                watch.active()
            text = message.get("text")
            if text is None:
                if message["type"] != "websocket.receive":  # websocket.disconnect
                    return
                raw: str | bytes = message.get("bytes") or b""
            else:
                raw = text
            if executor is None:  # does not block (runs_on_loop): no thread hop
                reply, keep_open = await session.handle_async(raw)
            elif call is not None:  # the session's own thread: one hop
                reply, keep_open = await call(handle, raw)
            else:  # attached to an openenv/session/create session: its executor
                reply, keep_open = await loop.run_in_executor(executor, handle, raw)
            try:
                if reply is not None:
                    await send({"type": "websocket.send", "text": _text(reply)})
                if not keep_open:
                    await send({"type": "websocket.close", "code": 1000, "reason": ""})
                    return
            except (RuntimeError, OSError):  # the client is gone (uvicorn: ClientDisconnected, an OSError)
                return
            if watch is not None:
                watch.quiet()
    finally:
        if watch is not None:
            watch.cancel()


# ------------------------------------------------------------------ uvicorn


def uvicorn_config(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
    max_pending: int = DEFAULT_MAX_PENDING,
    **kwargs: Any,
) -> uvicorn.Config:
    """uvicorn's settings for ``app`` with the embedded server's connection limits.

    ``uvicorn.Server(uvicorn_config(app)).run()`` serves like
    ``python -m openenv serve --asgi``.  uvicorn itself closes idle keep-alive
    connections (``timeout_keep_alive``) but waits forever for the first
    request of a connection; here a connection that has not sent a whole
    request head within ``handshake_timeout`` seconds is closed, and while
    ``max_pending`` connections are waiting for theirs, a new one is answered
    ``503`` and closed without being read.

    Args:
        app: the ASGI app (`create_app()`).
        host: interface to bind.
        port: TCP port (``0``: any free one).
        handshake_timeout: seconds a connection has to send a request head
            (``None``: no limit).
        max_pending: connections waiting for their request head, at most.
        **kwargs: more ``uvicorn.Config`` arguments (``ws`` defaults to
            uvicorn's ``"websockets-sansio"`` implementation, made to pause
            a socket's reading only when two messages wait for the app,
            rather than for every message as uvicorn does).

    Raises:
        ValueError: a bad ``handshake_timeout`` or ``max_pending``.
    """
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    handshake_timeout = check_seconds("handshake_timeout", handshake_timeout)
    max_pending = check_count("max_pending", max_pending)
    kwargs.setdefault("ws", _read_ahead_ws())  # websockets-sansio: the legacy implementation is deprecated
    http = _limited_http(AutoHTTPProtocol, handshake_timeout, max_pending)
    config = uvicorn.Config(app, host=host, port=port, http=http, **kwargs)  # configures uvicorn's loggers
    # its access lines show paths with their query (/ws?token=...), and websockets-sansio logs every request
    # header at DEBUG on uvicorn.error: both with values hidden (after Config, which set the loggers up)
    for name in ("uvicorn.error", "uvicorn.access"):
        redact_logger(logging.getLogger(name))
    return config


#: Messages waiting for the app after which a ``/ws`` connection's socket is no longer read (uvicorn: 1).
_READ_AHEAD = 2


def _max_fragments() -> int:
    """The most frames of one message the embedded server takes (websockets' ``MAX_FRAGMENTS``, 4096)."""
    try:
        from websockets.asyncio.messages import MAX_FRAGMENTS
    except ImportError:  # a websockets without the cap
        return 4096
    return int(MAX_FRAGMENTS)


#: ``/ws`` messages of more frames than this close the connection with ``1009`` "too many fragments".
_MAX_FRAGMENTS = _max_fragments()


def _read_ahead_ws() -> type[asyncio.Protocol] | str:
    """uvicorn's websockets-sansio protocol, pausing the socket's reading only ``_READ_AHEAD`` messages ahead.

    uvicorn pauses a connection's reading whenever it queues a message for the
    app and resumes it when the app takes it: two ``epoll_ctl`` calls and the
    selector's bookkeeping on every frame, for a client that waits for each
    reply anyway.  Here reading pauses only while ``_READ_AHEAD`` messages
    wait (memory stays bounded by that many messages of ``ws_max_size``), and
    resumes as uvicorn's does, once the app has taken them all.
    """
    from uvicorn.protocols.websockets import websockets_sansio_impl as impl

    base: Any = impl.WebSocketsSansIOProtocol
    if not all(hasattr(base, name) for name in ("send_receive_event_to_app", "receive")):  # another uvicorn
        return "websockets-sansio"

    class ReadAheadWebSockets(base):  # type: ignore[misc]
        read_paused: bool  # uvicorn's: whether it paused the socket's reading
        frames: list[bytes]  # uvicorn's: the fragments of the message being received
        _too_many = False

        def handle_cont(self, event: Any) -> None:
            # the embedded server's cap (websockets' MAX_FRAGMENTS): uvicorn gathers any number of fragments,
            # and 100,000 one-byte ones stalled its loop for a third of a second
            if self._too_many:
                return
            if len(self.frames) >= _MAX_FRAGMENTS:
                self._too_many = True
                self.frames = []
                self.conn.fail(1009, "too many fragments")  # from here on its parser discards what comes
                self.queue.put_nowait({"type": "websocket.disconnect", "code": 1009, "reason": "too many fragments"})
                self.close_sent = True
                # the close frame, then a half-close: uvicorn's handle_parser_exception() closes the socket at
                # once, and a client still sending its fragments then gets a reset instead of the 1009
                self.transport.write(b"".join(self.conn.data_to_send()))
                if self.transport.can_write_eof():
                    self.transport.write_eof()
                asyncio.get_running_loop().call_later(_REFUSED_LINGER, self.transport.close)
                return
            super().handle_cont(event)

        def send_receive_event_to_app(self) -> None:
            paused = self.read_paused
            self.read_paused = True  # so that uvicorn's own rule does not pause it for this message
            try:
                super().send_receive_event_to_app()
            finally:
                self.read_paused = paused
            if not paused and self.queue.qsize() >= _READ_AHEAD and not self.transport.is_closing():
                self.read_paused = True
                self.transport.pause_reading()

    return ReadAheadWebSockets


def serve(
    config: uvicorn.Config, *, on_ready: Callable[[str], object] | None = None, sock: socket.socket | None = None
) -> None:
    """Serve until Ctrl-C or ``SIGTERM``, as ``python -m openenv serve --asgi`` does.

    ``uvicorn.Server(config).run()`` (blocking: it runs its own event loop),
    plus the embedded server's two manners: ``on_ready(url)`` is called once
    it listens (with the bound port, so ``port=0`` can be used), and
    ``SIGTERM`` (from the main thread) stops it gracefully as Ctrl-C does;
    either ends as a clean return, not a ``KeyboardInterrupt``.  For example
    ``serve(uvicorn_config(create_app(MyEnvironment), port=0), on_ready=print)``.

    Args:
        config: uvicorn's settings, best made by [`uvicorn_config()`][openenv.server.asgi.uvicorn_config].
        on_ready: called with the base URL (``http://127.0.0.1:PORT``) once the socket listens.
        sock: a bound TCP socket to serve on instead of the config's ``host``
            and ``port`` (``python -m openenv serve --asgi --fd N``); uvicorn
            makes it listen with the config's backlog and closes it at shutdown.

    Raises:
        ValueError: ``sock`` is not a bound TCP socket.
    """
    import uvicorn

    check_listener(sock)

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if on_ready is not None and self.servers and self.servers[0].sockets:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                on_ready(f"http://{f'[{host}]' if ':' in host else host}:{port}")

    # uvicorn shuts down gracefully on Ctrl-C / SIGTERM, then raises the signal again with the
    # previous handlers back: SIGINT's is Python's KeyboardInterrupt; SIGTERM's gets ours, which
    # raises it too (as EnvServer.serve_forever does), so both end here, as a clean exit
    import signal

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, raise_keyboard_interrupt) if in_main else None
    try:
        Server(config).run(sockets=[sock] if sock is not None else None)
    except KeyboardInterrupt:
        logger.info("interrupted; stopped")
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _limited_http(base: type[asyncio.Protocol], timeout: float | None, max_pending: int) -> type[asyncio.Protocol]:
    """``base`` (uvicorn's HTTP protocol) with a request-head timeout and a cap on connections waiting for one."""
    waiting: set[asyncio.Protocol] = set()  # this server's connections waiting for a request head

    class LimitedHttp(base):  # type: ignore[valid-type, misc]
        _timer: asyncio.TimerHandle | None = None
        _refusal: Refusal | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            if len(waiting) >= max_pending:
                # refused as the embedded servers do (openenv.server._refusal)
                logger.warning("refusing a connection: %d connections already waiting for a request", max_pending)
                self._refusal = Refusal(self.transport)
                return
            self._wait()

        def eof_received(self) -> bool | None:
            if self._refusal is not None:
                return self._refusal.eof_received()
            return super().eof_received()  # type: ignore[no-any-return]

        def data_received(self, data: bytes) -> None:
            if self._refusal is not None:
                self._refusal.data_received(data)
                return
            super().data_received(data)
            transport = self.transport
            cycle = getattr(self, "cycle", None)
            if (
                transport.is_closing()
                or transport.get_protocol() is not self  # upgraded to a WebSocket
                or (cycle is not None and not cycle.response_complete)  # a request is being served
            ):
                self._done()
            elif self not in waiting:  # bytes of the next request on a kept-alive connection
                self._wait()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refusal is not None:
                self._refusal.connection_lost()
            self._done()
            super().connection_lost(exc)

        def _wait(self) -> None:
            waiting.add(self)
            if timeout is not None and self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(timeout, self._expire)

        def _done(self) -> None:
            waiting.discard(self)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expire(self) -> None:
            self._timer = None
            if self in waiting:
                waiting.discard(self)
                logger.info("closing a connection: no request within %g s", timeout)
                self.transport.close()

    return LimitedHttp
