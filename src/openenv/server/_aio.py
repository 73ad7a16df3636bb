"""The asyncio transport of [`EnvServer`][openenv.server.EnvServer] (the default).

websockets' asyncio server on an event loop of its own, in one daemon thread
started by `EnvServer.start()`. Every connection is a task on that loop: a
connection costs no thread. The frames go through the same sans-I/O
`openenv.server.protocol` as the threading transport (`openenv.server._threads`),
and the HTTP hooks and the handshake's slot rule are the same
`openenv.server._wsserve` functions.  It is given what it needs
(`AsyncioTransport(settings, protocol, pending)`) and reads nothing else of the
facade.

Environments that do not block (`openenv.server.protocol.runs_on_loop`: async
methods, OpenEnv's ``reset_async``/``step_async``, or ``blocking = False``) run
on the loop, with no thread hop (their plain methods, unless ``blocking = False``,
on the session's worker thread). A blocking environment gets a worker thread
per session (`_Worker`), made with the session and joined when it ends, so one
slow ``step`` stalls only its own session while the loop keeps answering pings
and the other sessions. The HTTP routes that may build a blocking environment
(``GET /state``; ``/metadata`` and ``/schema`` of a factory that is not a class:
`EnvProtocol.get_may_block`) are answered on a thread of the loop's default
executor, never on the loop.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import logging
import queue
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request
from websockets.protocol import CONNECTING, OPEN
from websockets.server import ServerProtocol

from ._idle import IdleTimer, settle
from ._refusal import Refusal
from ._session import closes_on_loop, opens_on_loop
from ._settings import STOP_CLOSE, PendingGate, ServerSettings, idle_close
from ._wscompat import handler_tasks, install_request_parser, method_of, read_after_fail, server_logger
from ._wsserve import body_response, claim_slot, handshake_ended, payload, process_request
from .protocol import EnvProtocol, Session, runs_on_loop

__all__ = ["AsyncioTransport"]

logger = logging.getLogger("openenv.server")

T = TypeVar("T")


class _Inbox:
    """Hands worker threads' results to the loop: one wake-up for all those that arrive together.

    ``loop.call_soon_threadsafe`` per result writes to the loop's self-pipe (a
    syscall, and a loop wake-up) each time; with many sessions finishing their
    steps at once, one scheduled `_drain` settles them all.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: collections.deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = collections.deque()
        self._scheduled = False

    def put(self, future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
        """From a worker thread; raises ``RuntimeError`` when the loop is closed."""
        if self._loop.is_closed():  # even with a _drain still flagged as due: it will never run
            raise RuntimeError("Event loop is closed")
        self._items.append((future, result, exc))
        if not self._scheduled:  # else a _drain is due and will take it (it clears the flag before it pops)
            self._scheduled = True
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        items = self._items
        while items:
            try:
                settle(*items.popleft())
            except Exception:  # a future that refuses its exception (StopIteration): the others still settle
                logger.exception("could not hand a worker's result to its session")


class _Worker:
    """One thread that runs a blocking session's environment calls, one at a time, in order."""

    def __init__(self, name: str, inbox: _Inbox) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = queue.SimpleQueue()
        self._loop = asyncio.get_running_loop()
        self._inbox = inbox
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        put = self._inbox.put
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, future = item
            try:
                result = fn()
            except BaseException as exc:  # handed to the awaiting task
                try:
                    put(future, None, exc)
                except RuntimeError:  # the loop is closed: nobody awaits any more
                    return
            else:
                try:
                    put(future, result, None)
                except RuntimeError:
                    return

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``fn`` on the worker thread; await the returned future for its result."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._queue.put((fn, future))
        return future

    def close(self) -> None:
        """Let the thread end after the calls already queued."""
        self._queue.put(None)


def _idle_watch(connection: ServerConnection, idle: float) -> IdleTimer:
    """The connection's idle timer: closes it (``1001``) when its client sent nothing for ``idle`` seconds."""

    def close() -> None:
        code, reason = idle_close(idle)
        asyncio.get_running_loop().create_task(connection.close(code, reason))

    return IdleTimer(idle, close)


class AsyncioTransport:
    """Serves one protocol on websockets' asyncio server, its loop in a thread of its own."""

    def __init__(self, settings: ServerSettings, protocol: EnvProtocol, pending: PendingGate) -> None:
        self._settings = settings
        self._protocol = protocol
        self._pending = pending
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        #: every accepted (not refused) connection, in handshake or open: for stop()
        self._connections: set[ServerConnection] = set()
        #: every accepted socket's transport, refused ones too, until its connection_lost: stop() closes them all
        self._transports: set[asyncio.BaseTransport] = set()
        #: worker threads of blocking sessions still running: joined by stop()
        self._workers: set[_Worker] = set()
        self._inbox: _Inbox | None = None  # made on the loop with the first worker
        self._made = 0
        self._ended = threading.Event()  # set by the loop's thread when it has finished

    # ------------------------------------------------------------- lifecycle

    def start(self) -> int:
        """Bind, serve in a new daemon thread, and return the bound port (raises ``OSError`` if binding fails)."""
        loop = asyncio.new_event_loop()
        bound: concurrent.futures.Future[int] = concurrent.futures.Future()

        ended = self._ended = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(bound))
            finally:
                try:
                    _cancel_leftovers(loop)
                    loop.run_until_complete(loop.shutdown_default_executor())
                finally:
                    loop.close()
                    ended.set()

        thread = threading.Thread(target=run, name=f"openenv-server-{self._settings.port}", daemon=True)
        self._loop, self.thread = loop, thread
        thread.start()
        try:
            port = bound.result()
        except BaseException:
            thread.join()
            raise
        thread.name = f"openenv-server-{port}"
        return port

    def stop(self) -> None:
        """Close every session (1012), stop serving, and wait for the loop's thread and the workers."""
        loop, thread, stop = self._loop, self.thread, self._stop
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:
            raise RuntimeError("EnvServer.stop() cannot be called from the server's own event loop")
        if stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop already ended
                pass
        # wait for the loop's own "ended" rather than only thread.join(): a join that Ctrl-C once
        # interrupted (serve_forever's) can return at once afterwards on CPython < 3.13, and the process
        # would then exit before the loop sent every session its 1012 close
        self._ended.wait()
        thread.join()
        for worker in list(self._workers):
            worker.thread.join()
        self._workers.clear()

    async def _serve(self, bound: concurrent.futures.Future[int]) -> None:
        settings = self._settings
        self._stop = asyncio.Event()
        try:
            server = await serve(
                self._handler,
                process_request=self._process_request,
                create_connection=_make_connection_class(self),
                logger=server_logger(),
                **settings.serve_options(),
            )
        except BaseException as exc:
            bound.set_exception(exc)
            return
        bound.set_result(server.sockets[0].getsockname()[1])
        await self._stop.wait()
        await self._shutdown(server)

    async def _shutdown(self, server: Server) -> None:
        code, reason = STOP_CLOSE
        # websockets 15's Server.close cannot send 1012 (16+ can): close the connections ourselves on all
        server.close(close_connections=False)
        closers = []
        for connection in list(self._connections):
            state = connection.protocol.state
            if state is OPEN:
                closers.append(asyncio.ensure_future(connection.close(code, reason)))
            elif state is CONNECTING:
                connection.transport.abort()  # a silent or half-sent handshake: drop it
        if closers:
            await asyncio.wait(closers)
        await server.wait_closed()
        await self._drain(server)

    async def _drain(self, server: Server) -> None:
        """Close every socket still accepted, and await every connection's handler, before the loop closes.

        ``server.wait_closed()`` is not enough: a socket the listener accepted just before
        ``close()`` gets its ``connection_made`` (and its handler task, in handshake) a loop
        iteration later, after websockets stopped waiting for handlers (and asyncio < 3.12's
        ``wait_closed`` never waits for connections). Such a connection is aborted here, and its
        handler awaited, until none is left; else the loop closed with the handler pending and
        the socket left to the garbage collector (``ResourceWarning: unclosed``).
        """
        deadline = asyncio.get_running_loop().time() + 10.0  # bounded: what is left then is cancelled at close
        while True:
            await asyncio.sleep(0)  # let accepts in flight reach connection_made
            tasks = {task for task in handler_tasks(server) if not task.done()}
            if not self._transports and not tasks:
                return
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            for transport_ in list(self._transports):
                transport_.abort()  # type: ignore[attr-defined]  # a socket transport
            if tasks:
                await asyncio.wait(tasks, timeout=left)

    # ------------------------------------------------------------- HTTP

    def _process_request(self, connection: ServerConnection, request: Request) -> Any:
        """websockets' hook: `openenv.server._wsserve.process_request`, off the loop for a route that may block.

        ``GET /state`` (and ``/metadata``, ``/schema`` of a factory that is not
        a class) may build an environment: on a worker thread, like a blocking
        session's calls, so the loop keeps serving every other connection.
        """
        protocol = self._protocol
        path = request.path.split("?", 1)[0]
        if (
            method_of(request) == "GET"
            and "websocket" not in request.headers.get("Upgrade", "").lower()
            and protocol.get_may_block(path)
        ):
            loop = asyncio.get_running_loop()
            return loop.run_in_executor(None, process_request, protocol, connection, request)
        return process_request(protocol, connection, request)

    # ------------------------------------------------------------- sessions

    async def _handler(self, connection: ServerConnection) -> None:
        """One ``/ws`` connection: take its slot, create the env, run the loop, clean up."""
        protocol = self._protocol
        reserved = claim_slot(connection)
        worker: _Worker | None = None
        if protocol.opens_on_loop():
            session, error = protocol.open_session(reserved=reserved)
        else:  # the factory may block (or the class is only known from an instance)
            worker = self._worker()
            session, error = await worker.run(functools.partial(protocol.open_session, reserved=reserved))
            if session is not None and runs_on_loop(session.env):
                if session.offload and not opens_on_loop(session.env):
                    # coroutines beside plain methods: those on the loop, these on this worker (as the released
                    # server runs each method with no coroutine of its own on the session's one thread)
                    session.offload_to = worker.run
                else:
                    self._retire(worker)
                    worker = None
        if session is None:
            if worker is not None:
                self._retire(worker)
            if error is not None:
                await _send(connection, error)
            return  # websockets closes with 1000
        logger.debug("session opened (%s)", connection.remote_address)
        try:
            await self._session_loop(connection, session, worker)
        finally:
            if worker is None or closes_on_loop(session):
                try:
                    await protocol.end_session_async(session)  # an async close: on the loop that ran its coroutines
                finally:
                    if worker is not None:
                        self._retire(worker)
            else:
                try:
                    await worker.run(functools.partial(protocol.end_session, session))
                finally:
                    self._retire(worker)
            logger.debug("session closed")

    def _worker(self) -> _Worker:
        self._made += 1
        if self._inbox is None:
            self._inbox = _Inbox(asyncio.get_running_loop())
        worker = _Worker(f"openenv-session-{self._settings.port}-{self._made}", self._inbox)
        self._workers.add(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.close()
        # joined by stop(); forget the ones that already ended so the set stays small
        for done in [w for w in self._workers if not w.thread.is_alive()]:
            self._workers.discard(done)

    async def _session_loop(self, connection: ServerConnection, session: Session, worker: _Worker | None) -> None:
        idle = self._settings.idle_timeout
        watch = None if idle is None else _idle_watch(connection, idle)
        handle = session.handle
        handle_async = session.handle_async
        on_loop = worker is None or session.offload_to is not None  # the frames on the loop (plain calls: the worker)
        recv = connection.recv
        send = connection.send
        try:
            while True:
                try:
                    raw = await recv()
                except ConnectionClosed:
                    return
                if watch is not None:
                    watch.active()
                if on_loop:
                    reply, keep_open = await handle_async(raw)
                else:
                    reply, keep_open = await worker.run(functools.partial(handle, raw))  # type: ignore[union-attr]
                if reply is not None:  # `_send()`, inlined: one coroutine less per frame
                    try:
                        await send(payload(reply), text=True)
                    except ConnectionClosed:
                        return
                if not keep_open:
                    return
                if watch is not None:
                    watch.quiet()
        finally:
            if watch is not None:
                watch.cancel()


async def _send(connection: ServerConnection, frame: str) -> bool:
    """Send one text frame; ``False`` if the connection is gone."""
    try:
        await connection.send(payload(frame), text=True)
    except ConnectionClosed:
        return False
    return True


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and await the tasks still pending on ``loop`` (as ``asyncio.run`` does), so none is destroyed pending."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def _make_connection_class(transport: AsyncioTransport) -> type[ServerConnection]:
    """A ``ServerConnection`` subclass bound to ``transport``: the pending cap, the body parser, slot bookkeeping."""
    pending, protocol = transport._pending, transport._protocol
    # asyncio sets TCP_NODELAY on an accepted socket only when its listener says IPPROTO_TCP, and a listener
    # made with socket.socket() (EnvServer(sock=)) says 0: without this, replies would wait for Nagle
    given = transport._settings.sock
    nodelay = given is not None and given.proto != socket.IPPROTO_TCP

    class _Connection(ServerConnection):
        #: Whether this connection holds a reserved session slot (set by ``process_request``).
        slot = False
        _pending = False
        _refusal: Refusal | None = None
        _accepted: asyncio.BaseTransport | None = None

        def __init__(self, protocol_: ServerProtocol, *args: Any, **kwargs: Any) -> None:
            super().__init__(protocol_, *args, **kwargs)
            install_request_parser(protocol_, body_response)
            read_after_fail(self)

        def connection_made(self, transport_: asyncio.BaseTransport) -> None:
            self._accepted = transport_
            if nodelay:
                accepted = transport_.get_extra_info("socket")
                if accepted is not None:
                    with contextlib.suppress(OSError):
                        accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            transport._transports.add(transport_)
            if not pending.enter():
                # refused (openenv.server._refusal): websockets never sees the connection
                self._refusal = Refusal(cast(asyncio.WriteTransport, transport_))
                return
            self._pending = True
            transport._connections.add(self)
            super().connection_made(transport_)

        def data_received(self, data: bytes) -> None:
            if self._refusal is None:
                super().data_received(data)
            else:
                self._refusal.data_received(data)

        def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol allows a bool
            if self._refusal is not None:
                return self._refusal.eof_received()
            return super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._accepted is not None:
                transport._transports.discard(self._accepted)
            if self._refusal is not None:
                self._refusal.connection_lost()
                return
            self._leave_pending()
            transport._connections.discard(self)
            super().connection_lost(exc)

        def _leave_pending(self) -> None:
            if self._pending:
                self._pending = False
                pending.leave()

        async def handshake(self, *args: Any, **kwargs: Any) -> None:
            try:
                await super().handshake(*args, **kwargs)
            finally:
                self._leave_pending()
                handshake_ended(self, protocol)

    return _Connection
