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
[`EnvServer`][openenv.server.EnvServer]):

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

A blocking environment's session runs on its own worker thread, so a slow
``step`` blocks only its session and uvicorn keeps answering pings; one that
does not block (``async`` methods, ``reset_async``/``step_async``, or
``blocking = False``: `openenv.server.protocol.runs_on_loop`) runs on the
event loop, without a thread hop per frame.  At capacity a
``/ws`` upgrade is refused with ``503`` and the ``CAPACITY_REACHED`` frame as
body when the server supports ASGI's WebSocket denial responses (uvicorn
does); otherwise the frame is sent after the handshake, then the socket is
closed (the reference server's way).  A ``/ws`` client silent for
``idle_timeout`` seconds is closed with ``1001``.  Not served: the task API,
the web interface, WebSocket ``/mcp`` and ``/harness``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .app import DEFAULT_IDLE_TIMEOUT
from .protocol import EnvFactory, EnvProtocol, HttpReply, Session, runs_on_loop

__all__ = ["create_app"]


def _response(reply: HttpReply) -> Response:
    return Response(reply.body, reply.status, headers=dict(reply.headers), media_type=reply.content_type)


def _executor(session: Session) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"openenv-session-{session.session_id[:8]}")


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
) -> Starlette:
    """An ASGI app serving ``factory`` over OpenEnv's HTTP and WebSocket surface.

    Args:
        factory: an [`Environment`][openenv.server.Environment] subclass, or a
            zero-argument callable returning an environment.
        max_sessions: concurrent sessions (``/ws`` connections and
            ``openenv/session/create`` sessions); default 1, like the reference.
        name: the name ``GET /metadata`` reports (default: the class name).
        idle_timeout: seconds a ``/ws`` client may stay silent before its
            socket is closed (``1001``); ``None``: never.

    Returns:
        A Starlette app (run it with ``uvicorn module:app``).

    Raises:
        TypeError: ``factory`` is not callable.
        ValueError: a bad ``max_sessions`` or ``idle_timeout``.
    """
    if idle_timeout is not None and (
        isinstance(idle_timeout, bool) or not isinstance(idle_timeout, (int, float)) or idle_timeout <= 0
    ):
        raise ValueError(f"idle_timeout must be a positive number of seconds or None, not {idle_timeout!r}")
    protocol = EnvProtocol(factory, max_sessions=max_sessions, name=name)
    protocol.session_executor = _executor
    idle = None if idle_timeout is None else float(idle_timeout)

    async def get_route(request: Request) -> Response:
        return _response(await run_in_threadpool(protocol.http_get, request.url.path))

    async def reset(request: Request) -> Response:
        return _response(await run_in_threadpool(protocol.http_reset, await request.body()))

    async def step(request: Request) -> Response:
        return _response(await run_in_threadpool(protocol.http_step, await request.body()))

    async def mcp(request: Request) -> Response:
        return _response(await run_in_threadpool(protocol.http_mcp, await request.body()))

    async def ws(websocket: WebSocket) -> None:
        session_id = websocket.query_params.get("session_id")
        error: str | None
        if session_id:
            session, error = protocol.attach(session_id)
        else:
            if not protocol.reserve_slot():
                await _refuse(websocket, protocol)
                return
            env_cls = protocol._env_cls
            if env_cls is not None and runs_on_loop(env_cls):  # no thread hop, not even to create it
                session, error = protocol.open_session(reserved=True)
            else:
                session, error = await run_in_threadpool(lambda: protocol.open_session(reserved=True))
            if session is not None and not runs_on_loop(session.env):
                session.executor = _executor(session)  # blocking: every call on the session's own thread
        try:
            await websocket.accept()
        except BaseException:
            if session is not None:
                await _release(protocol, session)
            raise
        if session is None:
            await websocket.send_text(error or "")
            await websocket.close(1000)
            return
        try:
            await _loop(websocket, session, idle)
        finally:
            await _release(protocol, session)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await run_in_threadpool(protocol.end_all)

    routes: list[BaseRoute] = [
        Route(path, get_route, methods=["GET"]) for path in ("/health", "/metadata", "/schema", "/state")
    ]
    routes += [
        Route("/reset", reset, methods=["POST"]),
        Route("/step", step, methods=["POST"]),
        Route("/mcp", mcp, methods=["POST"]),
        WebSocketRoute("/ws", ws),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app.state.protocol = protocol
    return app


async def _refuse(websocket: WebSocket, protocol: EnvProtocol) -> None:
    """At capacity: a ``503`` denial response when the server can send one, else frame-then-close."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(_response(protocol.capacity_reply()))
        return
    await websocket.accept()
    await websocket.send_text(protocol.capacity_frame())
    await websocket.close(1000)


async def _release(protocol: EnvProtocol, session: Session) -> None:
    if protocol.detach(session):
        if session.executor is None and session.owner == "ws":  # it ran on the loop: close it there
            await protocol.end_session_async(session)
        else:
            await run_in_threadpool(protocol.end_session, session)


async def _loop(websocket: WebSocket, session: Session, idle: float | None) -> None:
    loop = asyncio.get_running_loop()
    while True:
        try:
            message = await asyncio.wait_for(websocket.receive(), idle)
        except asyncio.TimeoutError:
            await websocket.close(1001, f"idle timeout: no message for {idle:g} s")
            return
        if message["type"] == "websocket.disconnect":
            return
        raw: str | bytes = message["text"] if message.get("text") is not None else message.get("bytes") or b""
        if session.executor is None:  # does not block (runs_on_loop): no thread hop
            reply, keep_open = await session.handle_async(raw)
        else:
            reply, keep_open = await loop.run_in_executor(session.executor, session.handle, raw)
        try:
            if reply is not None:
                await websocket.send_text(_text(reply))
            if not keep_open:
                await websocket.close(1000)
                return
        except (WebSocketDisconnect, RuntimeError, OSError):
            return
