# GENERATED from src/openenv/_async/connection.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The connection room of ``Env``: the session's WebSocket and its request loop.

The sans-IO ``Session`` (``_core/session.py``) makes the decisions (whether a call
may reconnect, what a lost connection means for the episode, which error to raise);
this module does the IO they call for.  It knows nothing about MCP: the tools room
(``_Tools`` in ``tools.py``) plugs in through ``_session_ws_url()`` and ``_on_open()``.

It is also the seam between ``EnvPool`` and the sessions it drives, written down
as the ``Seam`` protocol: a pool has each session build its ``Request`` with the
same builder ``Env``'s own calls use (``_reset_request`` / ``_step_request``, which
end in ``_core/session.py``'s ``Request``), sends it (``_send``, which returns a
``Ticket``), and later reads the reply (``_receive``) or gives it up (``_abandon``);
``_opens`` says whether a send would open a connection first.  The pool reads
none of the session's attributes.
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from types import EllipsisType
from typing import Any, Protocol

from typing_extensions import TypeVar
from websockets.exceptions import ConnectionClosed

from .._adapters import closed_error, connect_error, connect_kwargs
from .._core import frames
from .._core.errors import ConnectError, MessageTimeout, OpenEnvError, ProtocolError, ServerError, SessionLost
from .._core.guard import InFlight
from .._core.options import ClientOptions
from .._core.session import Attempt, Request, RequestKind, Session
from .._core.urls import Endpoints
from .._shim_sync import WebSocket, loop_token, ws_abandon, ws_connect, ws_pending, ws_recv

__all__ = ["Seam", "Ticket"]

T = TypeVar("T")

logger = logging.getLogger("openenv")


def _dropped(ws: WebSocket, url: str) -> None:
    """An ``Env`` was garbage-collected while connected: free its server session (safe from any thread)."""
    ws_abandon(ws)
    if sys.is_finalizing():  # the program's end: every session ends with it, and that is no mistake
        return
    logger.warning(
        "an Env connected to %s was garbage-collected without close(): its server session is dropped; "
        "close it (env.close(), or use it in a with block) to end the session cleanly",
        url,
    )


class Ticket:
    """A request that went out and awaits its reply: what ``_send()`` returns, for ``_receive()`` or ``_abandon()``.

    Attributes:
        ws: the WebSocket the reply comes on (a pool waits on several at once).
    """

    __slots__ = ("kind", "frame", "attempt", "ws", "parse")

    def __init__(
        self, kind: RequestKind, frame: str, attempt: Attempt, ws: WebSocket, parse: Callable[[dict[str, Any]], Any]
    ) -> None:
        self.kind, self.frame, self.attempt, self.ws, self.parse = kind, frame, attempt, ws, parse


class _Connection:
    """The socket and request internals of ``Env`` (a mixin: no public API, no constructor).

    ``Env.__init__`` sets the attributes declared here.
    """

    _endpoints: Endpoints
    _options: ClientOptions
    _guard: InFlight
    _stack: ExitStack | None
    _ws: WebSocket | None
    #: the socket that has carried a request (a message waiting on it answers none)
    _asked: object
    _loop: object
    _session: Session
    #: drops the socket if the ``Env`` is garbage-collected while connected (a dropped
    #: client would otherwise hold its server session, and a one-session server's only
    #: slot, until the program exits: the socket's own threads or tasks keep it alive)
    _finalizer: weakref.finalize[Any, Any] | None = None
    #: the connection whose handshake is under way, for ``close()`` to drop from another task or thread
    _connecting: WebSocket | None = None

    def _connect(self) -> None:
        """Open the WebSocket unless one is open on this event loop (``Env.connect()``)."""
        self._check_open()
        with self._guard:
            if self._ws is None or self._loop is not loop_token():
                self._open()

    def _session_ws_url(self) -> str:
        """The ``/ws`` URL to open (the tools room attaches it to a session in production mode)."""
        return self._endpoints.ws_url

    def _on_open(self) -> None:
        """Called once a new WebSocket is open, before its first request (the tools room checks the attach)."""

    def _check_open(self) -> None:
        self._session.check_open()

    def _opens(self, request: Request[Any]) -> bool:
        """Whether ``_send()`` of ``request`` would open a new connection first.

        A step of an episode whose connection was lost would not: ``_send()`` raises
        ``SessionLost`` for it (the episode on the server is gone), and nothing is opened.
        """
        return self._ws is None and (self._session.lost is None or request.kind.starts_episode)

    def _open(self) -> None:
        """Open a new WebSocket (a new server session), dropping any previous one."""
        self._shutdown(send_close=True)
        self._session.opening()
        self._check_open()
        stack = ExitStack()
        options = self._options
        url = self._session_ws_url()
        try:
            ws = stack.enter_context(
                ws_connect(url, on_connection=self._handshaking, **connect_kwargs(options, self._endpoints))
            )
        except Exception as exc:
            self._check_open()  # close() dropped the handshake: EnvClosed, not the handshake's own error
            error = connect_error(exc, self._endpoints, options.connect_timeout, options.headers.values())
            # the library's own text may quote a header value: chain it only when it is clean
            raise error from (exc if options.scrub(str(exc)) == str(exc) else None)
        finally:
            self._connecting = None
        self._stack, self._ws, self._loop = stack, ws, loop_token()
        self._finalizer = weakref.finalize(self, _dropped, ws, self._session.where)
        self._finalizer.atexit = False  # at exit, the atexit cleanups and the process's end do it
        self._session.opened()
        if self._session.closed:  # close() ran while this connection was being opened
            self._shutdown(send_close=True)
            self._check_open()
        self._on_open()

    def _shutdown(self, *, send_close: bool) -> None:
        """Close the current WebSocket, politely when ``send_close``; never raises."""
        stack, ws = self._stack, self._ws
        self._stack = self._ws = None
        self._unwatch()
        self._session.disconnected()
        if stack is None or ws is None:
            return
        if self._loop is not loop_token():
            ws_abandon(ws)  # bound to another event loop: it cannot be awaited here
            return
        try:
            if send_close:
                ws.send(frames.CLOSE_FRAME)
            stack.close()
        except Exception:
            ws_abandon(ws)
        except BaseException:
            ws_abandon(ws)
            raise

    def _lose(self, reason: str) -> None:
        """Close the socket; remember a lost episode so later calls say so."""
        self._session.lose(reason)
        self._shutdown(send_close=False)

    def _lose_now(self, reason: str, *, had_episode: bool) -> None:
        """Drop the socket at once, without a closing handshake (its state is unknown)."""
        self._session.lose(reason, had_episode=had_episode)
        ws = self._ws
        self._stack = self._ws = None
        self._unwatch()
        if ws is not None:
            ws_abandon(ws)

    def _handshaking(self, ws: WebSocket) -> None:
        self._connecting = ws
        if self._session.closed:  # close() came before the connection: it does not go on
            ws_abandon(ws)

    def _drop_handshake(self) -> None:
        """``close()``'s part: a handshake under way on another task or thread ends at once (``EnvClosed`` there)."""
        ws = self._connecting
        if ws is not None:
            ws_abandon(ws)

    def _unwatch(self) -> None:
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()

    def _socket_for(self, kind: RequestKind) -> WebSocket:
        if self._ws is not None and self._loop is not loop_token():
            # never reuse a connection made on another event loop
            self._lose(Session.OTHER_LOOP)
        if self._session.needs_connection(kind) or self._ws is None:
            self._open()
        assert self._ws is not None
        return self._ws

    def _request(self, request: Request[T]) -> T:
        """Send ``request``'s frame, read its reply, and return ``request.parse(data)`` of the reply's ``data``.

        The same as ``_send()`` then ``_receive()``: the session decides what each
        outcome means (retry, lost episode); any [`ProtocolError`][openenv.sync.ProtocolError],
        from the envelope check or from ``parse``, closes the connection (its state is
        unknown), as the error promises.
        """
        # ``_send()`` then ``_receive()`` inlined, and ``_server_gone()`` asked here rather than
        # in an override: every step takes this path (bench/README.md, the step section)
        self._session.check_open()
        guard = self._guard
        try:
            guard.__enter__()
            try:
                sent = self._send_attempt(request.kind, request.frame, 1, request.parse)
                return self._receive_reply(sent, request.parse, self._options.message_timeout)
            finally:
                guard.__exit__(None, None, None)  # before the question below: it may take a while
        except (ConnectError, SessionLost) as exc:
            gone = self._server_gone(exc)
            if gone is None:
                raise
            raise gone from exc

    def _server_gone(self, exc: ConnectError | SessionLost) -> OpenEnvError | None:
        """The error a request raises instead of ``exc`` when the server has died, else ``None``.

        ``Env`` says so for a server it started (``reset()`` cannot help then).
        """
        return None

    def _send(self, request: Request[Any]) -> Ticket:
        """The send half of a request: take the session's in-flight slot and send its frame.

        The slot stays taken until ``_receive()`` (or ``_abandon()``) of the
        returned ticket; in between, another call raises ``SessionBusy``.  Opens
        the connection first when it must (a reset after a loss).
        """
        self._session.check_open()
        self._guard.__enter__()
        try:
            return self._send_attempt(request.kind, request.frame, 1, request.parse)
        except BaseException:
            self._guard.__exit__(None, None, None)
            raise

    def _send_attempt(
        self, kind: RequestKind, frame: str, number: int, parse: Callable[[dict[str, Any]], Any]
    ) -> Ticket:
        session = self._session
        ws = self._ws
        reused = ws is not None
        if ws is None or self._loop is not loop_token() or not session.connected:
            ws = self._socket_for(kind)  # (the connection is there and ours on the hot path)
        attempt = session.attempt(kind, number, reused=reused)
        if self._asked is ws and ws_pending(ws):
            # a second reply to an earlier request: taking it as this call's reply would
            # shift every later reply by one, so the connection is dropped instead.  Only
            # on a socket that already carried a request: before that, what waits is the
            # server's own say (OpenEnv's servers send CAPACITY_REACHED right after accepting)
            self._lose(Session.unsolicited_reason(kind))
            raise ProtocolError(Session.unsolicited_message(attempt))
        try:
            ws.send(frame)
            attempt.sent = True
            self._asked = ws
        except ConnectionClosed:
            pass  # the server may have said why before closing (CAPACITY_REACHED): read it
        except BaseException:
            # cancelled or interrupted mid-request: the reply may still come, never reuse it
            self._lose_now(Session.interrupted_reason(kind), had_episode=attempt.had_episode)
            raise
        return Ticket(kind, frame, attempt, ws, parse)

    def _abandon(self, sent: Ticket) -> None:
        """Give up on a sent request without reading its reply: the session is lost (the reply may still come)."""
        try:
            if self._ws is sent.ws:
                self._lose_now(Session.interrupted_reason(sent.kind), had_episode=sent.attempt.had_episode)
        finally:
            self._guard.__exit__(None, None, None)

    def _receive(
        self, sent: Ticket, parse: Callable[[dict[str, Any]], T], *, timeout: float | None | EllipsisType = ...
    ) -> T:
        """The receive half of a request: read the reply of ``sent`` and return ``parse(data)``.

        Releases the in-flight slot taken by ``_send()``, whatever happens.
        ``timeout`` replaces ``message_timeout`` for this read (a pool whose
        request already waited).
        """
        try:
            return self._receive_reply(
                sent, parse, self._options.message_timeout if isinstance(timeout, EllipsisType) else timeout
            )
        finally:
            self._guard.__exit__(None, None, None)

    def _receive_reply(self, sent: Ticket, parse: Callable[[dict[str, Any]], T], timeout: float | None) -> T:
        session = self._session
        while True:
            kind, attempt, ws = sent.kind, sent.attempt, sent.ws
            try:
                raw = ws_recv(ws, timeout)
            except ConnectionClosed as exc:
                error = closed_error(exc, kind.label, self._options.max_message_size, attempt.had_episode)
                self._lose(Session.closed_reason(kind))
                if session.may_retry(attempt, error):
                    # a stale socket with nothing to lose: one fresh try
                    sent = self._send_attempt(kind, sent.frame, 2, sent.parse)
                    timeout = self._options.message_timeout
                    continue
                raise error from None
            except TimeoutError:
                self._lose_now(Session.timeout_reason(kind), had_episode=attempt.had_episode)
                raise MessageTimeout(Session.timeout_message(attempt, self._options.message_timeout)) from None
            except BaseException:
                # cancelled or interrupted mid-request: the reply may still come, never reuse it
                self._lose_now(Session.interrupted_reason(kind), had_episode=attempt.had_episode)
                raise
            try:
                data = frames.decode_reply(raw, kind.reply)
            except ServerError as exc:
                reason = Session.server_error_reason(exc)
                if reason is not None:
                    self._lose(reason)
                raise
            except ProtocolError:
                self._lose(Session.protocol_reason(kind))
                raise
            session.replied(kind)
            # --- the reply's payload: a ProtocolError here closes the connection too ---
            try:
                return parse(data)
            except ProtocolError:
                self._lose(Session.protocol_reason(kind))
                raise


class Seam(Protocol):
    """What ``EnvPool`` drives each session through (``Env`` has it): the pool reads none of its attributes.

    The order of one request: ``_step_request``/``_reset_request`` (the frame,
    built as ``Env.step``/``reset`` build theirs; nothing is sent), ``_opens``
    (whether sending opens a connection first: the pool opens those together),
    ``_send`` (returns a ``Ticket``; the session's in-flight slot stays taken), then
    ``_receive`` of the ticket, or ``_abandon`` of it (the session is then lost).
    """

    def _reset_request(self, kwargs: Mapping[str, Any]) -> Request[Any]: ...

    def _step_request(self, action: Any) -> Request[Any]: ...

    def _opens(self, request: Request[Any]) -> bool: ...

    def _send(self, request: Request[Any]) -> Ticket: ...

    def _receive(
        self, sent: Ticket, parse: Callable[[dict[str, Any]], T], *, timeout: float | None | EllipsisType = ...
    ) -> T: ...

    def _abandon(self, sent: Ticket) -> None: ...
