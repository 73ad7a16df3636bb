"""The async half of the per-side primitives (the sync half is ``_shim_sync``).

The only hand-written code that differs by flavour.  Both modules export the
same names with the same parameters; ``tests/test_facades.py::test_shims_match`` checks it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import sys
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from websockets.asyncio.client import ClientConnection as WebSocket
from websockets.asyncio.client import connect as _connect

__all__ = [
    "WebSocket",
    "sleep",
    "run_blocking",
    "run_cleanup",
    "run_settled",
    "run_all",
    "ws_connect",
    "ws_recv",
    "ws_abandon",
    "ws_pending",
    "loop_token",
    "run_to_completion",
    "ws_wait_any",
    "run_all",
    "new_lock",
    "current_loop",
    "callable_from_threads",
]

T = TypeVar("T")

#: set on a connection by ws_abandon(): a transport that comes later is dropped at once
_ABANDONED = "_openenv_abandoned"


async def sleep(seconds: float) -> None:
    """Sleep without blocking the event loop."""
    await asyncio.sleep(seconds)


async def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call in a worker thread."""
    return await asyncio.to_thread(fn, *args, **kwargs)


async def run_settled(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call in a worker thread to its end: a cancelled caller waits for it, then is cancelled.

    For a call whose outcome the caller's cleanup needs (a process it started, where ``stop()`` finds it):
    ``to_thread`` alone hands the cancellation over while the thread still runs.
    """
    call = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        await asyncio.wait([call])
        raise


async def run_cleanup(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking teardown in a worker thread; cancelling the caller does not stop it."""
    return await asyncio.shield(asyncio.to_thread(fn, *args, **kwargs))


async def run_all(
    calls: Sequence[Callable[[], Awaitable[T]]],
    on_interrupt: Callable[[], Awaitable[Any]],
    limit: int | None = None,
) -> list[T | BaseException]:
    """Run zero-argument coroutine functions at once; return each one's result, or the exception it raised, in order.

    With ``limit``, at most that many calls run at a time, in order; the
    others wait for a place.  If the caller is cancelled meanwhile, every call
    is cancelled and has ended, then ``on_interrupt()`` runs (the sync side
    needs it to end its threads: it stops what the calls wait on), and the
    cancellation propagates.
    """
    if limit is not None and len(calls) > limit:
        gate = asyncio.Semaphore(limit)

        def gated(call: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
            async def run() -> T:
                async with gate:
                    return await call()

            return run

        calls = [gated(call) for call in calls]
    tasks = [asyncio.ensure_future(call()) for call in calls]
    try:
        return await asyncio.gather(*tasks, return_exceptions=True)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        await on_interrupt()
        raise


def _watched(options: dict[str, Any], on_connection: Callable[[WebSocket], Any] | None) -> dict[str, Any]:
    """``options`` whose connection factory calls ``on_connection(ws)`` with each connection it makes."""
    if on_connection is None:
        return options
    base = options.pop("create_connection", None) or WebSocket

    def create(*args: Any, **kwargs: Any) -> WebSocket:
        ws = base(*args, **kwargs)
        made = ws.connection_made

        def connection_made(transport: Any) -> None:
            # asyncio makes the connection before its transport is there (the TCP connection is
            # up; with TLS, the TLS handshake is still to come): a ws_abandon() that found no
            # transport left a mark, and the transport is dropped as soon as it exists
            made(transport)
            if getattr(ws, _ABANDONED, False):
                transport.abort()

        ws.connection_made = connection_made  # type: ignore[method-assign]
        on_connection(ws)
        return ws

    return {**options, "create_connection": create}


if sys.version_info >= (3, 11):

    def ws_connect(url: str, on_connection: Callable[[WebSocket], Any] | None = None, **options: Any) -> Any:
        """A WebSocket connection to enter with ``enter_async_context``.

        ``on_connection(ws)`` is called with the connection as its TCP
        connection comes up, before the handshake: ``ws_abandon(ws)`` then
        ends the handshake at once.
        """
        return _connect(url, **_watched(options, on_connection))

else:

    @contextlib.asynccontextmanager
    async def ws_connect(url: str, on_connection: Callable[[WebSocket], Any] | None = None, **options: Any) -> Any:
        """A WebSocket connection to enter with ``enter_async_context``.

        On Python 3.10 a handshake that runs out of ``open_timeout`` raises
        ``asyncio.TimeoutError``, which is not the built-in ``TimeoutError``
        there: it is raised as the built-in one, as on 3.11+ and in the sync twin.
        """
        try:
            ws = await _connect(url, **_watched(options, on_connection))
        except asyncio.TimeoutError as exc:
            raise TimeoutError(str(exc) or "timed out during opening handshake") from exc
        async with ws:
            yield ws


if sys.version_info >= (3, 11):

    class _Watchdog:
        """One timer per connection, re-armed lazily, instead of a timer per receive.

        ``asyncio.timeout`` schedules and cancels a timer handle on every call,
        which costs about as much as the rest of a step.  Here a receive only
        records its deadline; the single timer fires at most once per timeout
        period, re-arms itself while receives keep finishing in time, and
        cancels the waiting task only when one is really overdue.
        """

        __slots__ = ("loop", "handle", "deadline", "task", "fired")

        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self.loop = loop
            self.handle: asyncio.TimerHandle | None = None
            self.deadline = 0.0
            self.task: asyncio.Task[Any] | None = None
            self.fired = False

        def expire(self) -> None:
            self.handle = None
            task = self.task
            if task is None:
                return  # idle: the next receive arms it again
            if self.loop.time() < self.deadline:
                self.handle = self.loop.call_at(self.deadline, self.expire)
                return
            self.fired = True
            task.cancel()

    async def ws_recv(ws: WebSocket, timeout: float | None) -> Any:
        """Receive one message; ``TimeoutError`` after ``timeout`` seconds."""
        if timeout is None:
            return await ws.recv()
        dog: _Watchdog | None = getattr(ws, "_openenv_watchdog", None)
        if dog is None:
            dog = _Watchdog(asyncio.get_running_loop())
            ws._openenv_watchdog = dog  # type: ignore[attr-defined]
        dog.deadline = deadline = dog.loop.time() + timeout
        dog.task = task = asyncio.current_task()
        handle = dog.handle
        if handle is None or handle.when() > deadline:
            if handle is not None:
                handle.cancel()
            dog.handle = dog.loop.call_at(deadline, dog.expire)
        base = task.cancelling() if task is not None else 0
        try:
            return await ws.recv()
        except asyncio.CancelledError:
            if dog.fired:
                dog.fired = False
                if task is not None and task.uncancel() <= base:
                    raise TimeoutError(f"no message within {timeout} s") from None
            raise
        finally:
            dog.task = None

else:  # pragma: no cover - Python 3.10

    async def ws_recv(ws: WebSocket, timeout: float | None) -> Any:
        """Receive one message; ``TimeoutError`` after ``timeout`` seconds."""
        try:
            return await asyncio.wait_for(ws.recv(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError from None


def ws_pending(ws: WebSocket) -> bool:
    """Whether a message arrived that no call has read yet (a reply nobody asked for).

    Only meaningful between requests of one-request-at-a-time protocols; a
    closed connection reports ``False`` (the next call learns why it closed).
    """
    assembler = getattr(ws, "recv_messages", None)
    frames = getattr(assembler, "frames", None)
    if frames is None or getattr(assembler, "closed", True):
        return False
    return len(frames) > 0


def ws_abandon(ws: WebSocket) -> None:
    """Drop a connection at once, without a closing handshake.

    Safe from any thread: when the connection's event loop runs in another
    thread, the abort is handed to that loop (which wakes up at once), so a
    call waiting there fails with ``ConnectionClosed`` right away.
    """
    # the mark first, the transport then (connection_made sets the transport, then reads the mark):
    # whatever the order of the two threads, one of them drops it
    setattr(ws, _ABANDONED, True)
    transport = getattr(ws, "transport", None)
    if transport is None:  # no transport yet: connection_made drops it when it comes (ws_connect's factory)
        return
    loop: asyncio.AbstractEventLoop | None = getattr(ws, "loop", None)
    if loop is not None and loop.is_closed():  # (TRL's rollout process closes its loop, then exits)
        keepalive = getattr(ws, "keepalive_task", None)
        if keepalive is not None and hasattr(keepalive, "_log_destroy_pending"):
            keepalive._log_destroy_pending = False  # it can never run again: no "Task was destroyed" at exit
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is not None and loop is not running and loop.is_running():
        try:
            loop.call_soon_threadsafe(transport.abort)
            return
        except RuntimeError:  # the loop closed meanwhile
            pass
    try:
        transport.abort()
        return
    except RuntimeError:  # its event loop is closed: nobody will ever close the socket
        pass
    sock = getattr(transport, "_sock", None)
    if sock is not None:
        sock.close()
        transport._sock = None


def loop_token() -> object:
    """Identifies the running event loop (connections are bound to it)."""
    return asyncio.get_running_loop()


def run_to_completion(fn: Callable[[], Any]) -> None:
    """Run a zero-argument coroutine function to completion from plain code (``atexit``), on a fresh event loop."""
    asyncio.run(fn())


def _ws_ready(ws: WebSocket) -> bool:
    """Whether ``recv`` would return at once: a message is buffered, or the connection is closed.

    Unknown websockets internals count as ready (the caller's ``recv`` then waits).
    """
    assembler = getattr(ws, "recv_messages", None)
    frames = getattr(assembler, "frames", None)
    if frames is None or getattr(assembler, "closed", True):
        return True
    return len(frames) > 0


async def ws_wait_any(sockets: Sequence[WebSocket], timeout: float | None) -> set[int]:
    """Wait until at least one of ``sockets`` has a message to read (or is closed).

    Returns the positions of every such socket; an empty set when ``timeout``
    seconds passed first (``None``: no limit).  Nothing is read.  It polls
    websockets' receive buffers on the event loop (a growing sleep, 50 µs to 2 ms),
    so it starts no tasks.
    """
    loop = asyncio.get_running_loop()
    end = None if timeout is None else loop.time() + timeout
    delay = 0.00005
    while True:
        ready = {i for i, ws in enumerate(sockets) if _ws_ready(ws)}
        if ready or not sockets:
            return ready
        if end is not None:
            left = end - loop.time()
            if left <= 0:
                return ready
            delay = min(delay, left)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.002)


# ---------------------------------------------------------------- TRL's async trainer (environment_factory)


def new_lock() -> Any:
    """A lock for ``async with``: one call of an object at a time (``asyncio.Lock``; the sync side: a thread lock)."""
    return asyncio.Lock()


def current_loop() -> object | None:
    """The event loop running in this thread, or ``None`` (always ``None`` on the sync side)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


F = TypeVar("F", bound=Callable[..., Any])


def callable_from_threads(fn: F, no_loop: str) -> F:
    """A coroutine method that the worker threads of its instance's event loop may also call (the sync side: ``fn``).

    * Called in a thread running an event loop, it returns ``fn``'s coroutine:
      ``await obj.method(...)`` as usual.
    * Called in any other thread, it runs ``fn`` on the instance's loop
      (``obj._loop``) and blocks that thread, not the loop, until the result is
      there (``asyncio.run_coroutine_threadsafe``): what TRL's async trainer does
      with ``reset``, through ``loop.run_in_executor``.
    * Reading the attribute in a thread that runs a loop binds an instance that
      has no loop yet to it (``obj._loop``): TRL reads ``env.reset`` on its loop,
      then calls it in a worker thread.
    * With no loop to run on, it raises ``TypeError(no_loop)``.

    On the class, the attribute is a plain function (``inspect.isfunction``).
    """
    return cast(F, _FromThreads(fn, no_loop))


class _FromThreads:
    """The descriptor of `callable_from_threads`."""

    def __init__(self, fn: Callable[..., Any], no_loop: str) -> None:
        self._fn = fn

        @functools.wraps(fn)
        def call(obj: Any, /, *args: Any, **kwargs: Any) -> Any:
            if current_loop() is not None:
                return fn(obj, *args, **kwargs)  # a coroutine: awaited by the caller, on its loop
            loop = getattr(obj, "_loop", None)
            if not isinstance(loop, asyncio.AbstractEventLoop) or loop.is_closed() or not loop.is_running():
                raise TypeError(no_loop)
            future = asyncio.run_coroutine_threadsafe(fn(obj, *args, **kwargs), loop)
            while True:
                try:
                    return future.result(timeout=0.5)
                except concurrent.futures.TimeoutError:
                    if loop.is_closed() or not loop.is_running():
                        future.cancel()
                        raise RuntimeError(
                            f"the event loop of {obj!r} stopped before {fn.__name__}() could run on it"
                        ) from None

        self._call = call

    def __set_name__(self, owner: type, name: str) -> None:
        self._call.__qualname__ = f"{owner.__qualname__}.{name}"

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self._call
        if getattr(obj, "_loop", None) is None:
            loop = current_loop()
            if loop is not None:
                obj._loop = loop
        return types.MethodType(self._call, obj)
