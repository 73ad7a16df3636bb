"""Every websockets (and asyncio) internal that the shims and the embedded server rely on.

websockets documents only part of what ``src/openenv/_shim_async.py``,
``src/openenv/_shim_sync.py`` and the server (``server/_wscompat.py``,
``server/_aio.py``, ``server/_threads.py``) touch: the server replaces the HTTP
request parser of the sans-I/O ``ServerProtocol`` (to answer requests that
carry a body), subclasses the threading and the asyncio servers'
``ServerConnection`` (to cap pending handshakes), and the client shims drop
connections through the transport. Each test here names one such internal and
fails with a message saying what breaks and where, so that a websockets
release that moves it is caught by the support matrix (``nox -s matrix``)
rather than by users. Run on every leg: websockets 15.0 (the floor) to the
newest release.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import inspect
import socket
from collections.abc import Generator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection as AsyncClientConnection
from websockets.http11 import Request
from websockets.protocol import CONNECTING, OPEN, Protocol
from websockets.server import ServerProtocol
from websockets.sync.client import ClientConnection as SyncClientConnection
from websockets.sync.server import Server, ServerConnection, serve

from openenv import _shim_async, _shim_sync
from openenv.server import EnvServer
from openenv.server import _wscompat as wscompat
from openenv.server._wsserve import body_response

from .envs import CounterEnv

VERSION = importlib.metadata.version("websockets")


def _broken(what: str, used_by: str) -> str:
    return (
        f"websockets {VERSION}: {what}. {used_by} relies on it; adapt that code to this "
        "release (or cap websockets in pyproject.toml) before supporting it."
    )


def _require(obj: Any, name: str, used_by: str) -> Any:
    owner = getattr(obj, "__name__", type(obj).__name__)
    assert hasattr(obj, name), _broken(f"{owner}.{name} no longer exists", used_by)
    return getattr(obj, name)


def _params(fn: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(fn).parameters)


# --------------------------------------------------------------------------- server: request parser


PARSER = "openenv.server._wscompat.install_request_parser/_parse_request (HTTP requests with a body)"


def _protocol() -> ServerProtocol:
    return ServerProtocol()


def test_server_protocol_parser_is_a_replaceable_generator() -> None:
    protocol = _protocol()
    parser = _require(protocol, "parser", PARSER)
    assert isinstance(parser, Generator), _broken("ServerProtocol.parser is not a generator", PARSER)
    reader = _require(protocol, "reader", PARSER)
    for name in ("read_line", "read_exact"):
        assert inspect.isgeneratorfunction(_require(reader, name, PARSER)), _broken(
            f"StreamReader.{name} is not a generator function", PARSER
        )
    for name in ("send_response", "reject", "send_eof", "discard", "events"):
        _require(protocol, name, PARSER)
    assert inspect.isgeneratorfunction(Protocol.parse), _broken("Protocol.parse is not a generator function", PARSER)
    assert "handshake_exc" in vars(protocol), _broken("ServerProtocol has no handshake_exc attribute", PARSER)


def test_install_request_parser_really_installs() -> None:
    """``_install_request_parser`` keeps websockets' parser on an unknown layout: make that loud here."""
    protocol = _protocol()
    original = protocol.parser
    wscompat.install_request_parser(protocol, body_response)
    assert protocol.parser is not original, _broken(
        "the server's request parser could not be installed (protocol layout changed)", PARSER
    )


def test_request_parse_takes_a_read_line_generator() -> None:
    """``Request.parse(read_line)`` drives a generator whose first argument is the line limit."""
    assert list(_params(Request.parse))[:1] == ["read_line"], _broken(
        f"Request.parse takes {list(_params(Request.parse))}, not (read_line)", PARSER
    )
    fields = {field.name for field in dataclasses.fields(Request)}
    assert {"path", "headers"} <= fields, _broken(f"Request fields are {sorted(fields)}", PARSER)
    assert wscompat._REQUEST_HAS_METHOD == ("method" in fields)


def _feed(protocol: ServerProtocol, data: bytes) -> None:
    protocol.receive_data(data)


def test_request_with_a_body_is_refused_after_the_headers() -> None:
    """``_body_request`` reads the refusal of a body from the lines read so far: the blank line must be among them."""
    protocol = _protocol()
    wscompat.install_request_parser(protocol, body_response)
    _feed(protocol, b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    data = b"".join(protocol.data_to_send())
    assert data.startswith(b"HTTP/1.1 501 "), _broken(f"a POST with a body was answered {data[:40]!r}", PARSER)
    assert b"use the /ws WebSocket" in data


def test_post_without_a_body_reaches_process_request() -> None:
    """websockets < 17 refuses any method but GET in ``Request.parse``: our parser hands it over anyway."""
    protocol = _protocol()
    wscompat.install_request_parser(protocol, body_response)
    _feed(protocol, b"POST /reset HTTP/1.1\r\nHost: x\r\n\r\n")
    events = protocol.events_received()
    assert len(events) == 1 and isinstance(events[0], Request), _broken(
        f"a bodiless POST gave the events {events!r}", PARSER
    )
    assert wscompat.method_of(events[0]) == "POST"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", b"414"),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", b"431"),
    ],
    ids=["request-line", "header-line"],
)
def test_too_long_lines_raise_security_error(request_bytes: bytes, status: bytes) -> None:
    """The parser maps websockets' ``SecurityError`` for too-long lines to 414/431."""
    protocol = _protocol()
    wscompat.install_request_parser(protocol, body_response)
    _feed(protocol, request_bytes)
    data = b"".join(protocol.data_to_send())
    assert data.startswith(b"HTTP/1.1 " + status), _broken(
        f"a too-long line was answered {data[:40]!r}, not {status.decode()}", PARSER
    )


# --------------------------------------------------------------------------- server: threading server


CONNECTION = "openenv.server._threads._make_connection_class (pending-handshake cap, slot bookkeeping)"
STOP = "openenv.server._threads.ThreadsTransport.stop (closing sessions with 1012)"


def test_serve_accepts_our_hooks() -> None:
    params = _params(serve)
    for name in ("process_request", "create_connection", "open_timeout", "max_size", "ping_interval", "ssl"):
        assert name in params, _broken(f"websockets.sync.server.serve() has no {name!r} argument", CONNECTION)


def test_server_connection_hooks() -> None:
    init = list(_params(ServerConnection.__init__).values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    assert len(init) >= 3 and all(p.kind in positional for p in init[1:3]), _broken(
        f"ServerConnection.__init__ takes {[p.name for p in init]}, not (socket, protocol, ...)", CONNECTION
    )
    for name in ("handshake", "close", "recv", "send"):
        _require(ServerConnection, name, CONNECTION)
    _require(ServerConnection, "close_socket", "openenv.server._wscompat.drop (EnvServer.stop on websockets < 17)")
    assert {"code", "reason"} <= set(_params(ServerConnection.close)), _broken(
        "ServerConnection.close() takes no code and reason", STOP
    )
    assert CONNECTING is not OPEN


def test_server_shutdown_or_our_fallback() -> None:
    """websockets 17 closes connections in ``Server.shutdown``; before, ``stop()`` does it itself."""
    params = _params(Server.shutdown)
    if wscompat.SYNC_SHUTDOWN_CLOSES:
        assert {"close_connections", "code", "reason"} <= set(params), _broken(
            f"Server.shutdown takes {list(params)}", STOP
        )
    else:
        assert list(params) == ["self"], _broken(f"Server.shutdown takes {list(params)}", STOP)
    _require(Server, "serve_forever", STOP)


ASYNC = "openenv.server._aio (the asyncio transport: pending cap, body parser, 1012 on stop)"


def test_asyncio_serve_and_connection_hooks() -> None:
    """The asyncio transport subclasses ``ServerConnection`` through its asyncio ``Protocol`` callbacks."""
    from websockets.asyncio.server import Server as AsyncServer
    from websockets.asyncio.server import ServerConnection as AsyncServerConnection
    from websockets.asyncio.server import serve as aserve

    params = _params(aserve)
    for name in ("process_request", "create_connection", "open_timeout", "max_size", "ping_interval"):
        assert name in params, _broken(f"websockets.asyncio.server.serve() has no {name!r} argument", ASYNC)
    init = list(_params(AsyncServerConnection.__init__))
    assert init[1:3] == ["protocol", "server"], _broken(f"asyncio ServerConnection.__init__ takes {init}", ASYNC)
    for name in ("connection_made", "data_received", "eof_received", "connection_lost", "handshake", "close", "recv"):
        _require(AsyncServerConnection, name, ASYNC)
    assert inspect.iscoroutinefunction(AsyncServerConnection.handshake), _broken("handshake is not a coroutine", ASYNC)
    assert "text" in _params(AsyncServerConnection.send), _broken("send() takes no text argument", ASYNC)
    assert "close_connections" in _params(AsyncServer.close), _broken("Server.close takes no close_connections", ASYNC)
    for name in ("sockets", "wait_closed"):
        _require(AsyncServer, name, ASYNC)


def test_asyncio_connections_are_ours_and_stop_closes_them_with_1012() -> None:
    """End to end on the asyncio transport: the protocol's parser is ours, ``transport`` is set, 1012 on stop."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    srv = EnvServer(CounterEnv, max_sessions=2, transport="asyncio").start()
    try:
        with connect(srv.ws_url) as ws:
            ws.send('{"type":"reset"}')
            assert '"observation"' in str(ws.recv(timeout=10))
            aio = srv._server
            connections = list(aio._connections)  # type: ignore[union-attr]
            assert len(connections) == 1 and type(connections[0]).__name__ == "_Connection"
            assert connections[0].transport is not None, _broken("ServerConnection.transport is not set", ASYNC)
            assert connections[0].protocol.parser.__name__ == "_parse_request", _broken("parser not installed", ASYNC)
            srv.stop()
            with pytest.raises(ConnectionClosed) as info:
                ws.recv(timeout=10)
            assert info.value.rcvd is not None and info.value.rcvd.code == 1012
    finally:
        srv.stop()


def test_connections_made_by_serve_are_ours_and_stop_closes_them() -> None:
    """End to end: a session on our connection class, closed with 1012 by ``stop()`` on this version."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    srv = EnvServer(CounterEnv).start()
    try:
        with connect(srv.ws_url, open_timeout=5) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=10)
            assert srv.active_sessions == 1
            srv.stop()
            with pytest.raises(ConnectionClosed) as caught:
                ws.recv(timeout=10)
            assert caught.value.rcvd is not None and caught.value.rcvd.code == 1012, _broken(
                f"stop() closed the session with {caught.value.rcvd}", STOP
            )
        assert srv.active_sessions == 0
    finally:
        srv.stop()


# --------------------------------------------------------------------------- client shims


ABANDON_ASYNC = "openenv._shim_async.ws_abandon (dropping a connection from any thread)"
WATCHDOG = "openenv._shim_async.ws_recv (one receive timer per connection, stored on the connection)"
SYNC = "openenv._shim_sync (ws_recv timeouts, ws_abandon)"


def test_sync_client_connection_api() -> None:
    assert "timeout" in _params(SyncClientConnection.recv), _broken("sync ClientConnection.recv() has no timeout", SYNC)
    _require(SyncClientConnection, "close_socket", SYNC)


def test_async_client_connection_takes_our_attribute_and_has_a_transport(echo_server: EnvServer) -> None:
    async def main() -> None:
        async with _shim_async.ws_connect(echo_server.ws_url, open_timeout=5) as ws:
            assert isinstance(ws, AsyncClientConnection)
            transport = _require(ws, "transport", ABANDON_ASYNC)
            assert isinstance(transport, asyncio.Transport), _broken(
                f"ClientConnection.transport is {type(transport).__name__}", ABANDON_ASYNC
            )
            # asyncio's selector transport keeps its socket in _sock: the last resort of ws_abandon
            assert isinstance(getattr(transport, "_sock", None), socket.socket), (
                f"asyncio's {type(transport).__name__} has no _sock; {ABANDON_ASYNC} relies on it"
            )
            loop = getattr(ws, "loop", None)
            assert loop is asyncio.get_running_loop(), _broken(
                "ClientConnection.loop is not its event loop", ABANDON_ASYNC
            )
            try:
                ws._openenv_watchdog = None  # type: ignore[attr-defined]
            except AttributeError:
                pytest.fail(_broken("ClientConnection takes no new attributes (__slots__?)", WATCHDOG))
            # the shims work on this version: a receive that times out, then an abandon
            with pytest.raises(TimeoutError):
                await _shim_async.ws_recv(ws, 0.05)
            _shim_async.ws_abandon(ws)

    asyncio.run(main())


def test_sync_shim_recv_timeout_and_abandon(echo_server: EnvServer) -> None:
    with _shim_sync.ws_connect(echo_server.ws_url, open_timeout=5) as ws:
        with pytest.raises(TimeoutError):
            _shim_sync.ws_recv(ws, 0.05)
        _shim_sync.ws_abandon(ws)


BUFFER = "openenv._shim_async/_shim_sync ws_pending and ws_wait_any (websockets' receive buffer)"
SYNC_RACES = "openenv._shim_sync._Connection (a server that refuses before the upgrade request is written)"


def _buffer_of(ws: Any) -> Any:
    assembler = _require(ws, "recv_messages", BUFFER)
    _require(assembler, "frames", BUFFER)
    assert isinstance(_require(assembler, "closed", BUFFER), bool), _broken("Assembler.closed is not a bool", BUFFER)
    return assembler


def test_sync_shim_reads_the_receive_buffer(echo_server: EnvServer) -> None:
    with _shim_sync.ws_connect(echo_server.ws_url, open_timeout=5) as ws:
        assert callable(_require(_buffer_of(ws).frames, "empty", BUFFER))
        assert not _shim_sync.ws_pending(ws)
        assert _shim_sync.ws_wait_any([ws], 0.05) == set(), _broken("an empty buffer reads as ready", BUFFER)
        ws.send('{"type":"reset"}')
        assert _shim_sync.ws_wait_any([ws], 10) == {0}
        assert _shim_sync.ws_pending(ws), _broken("a buffered message reads as absent", BUFFER)
        ws.recv(timeout=10)
        assert not _shim_sync.ws_pending(ws)


def test_async_shim_reads_the_receive_buffer(echo_server: EnvServer) -> None:
    async def main() -> None:
        async with _shim_async.ws_connect(echo_server.ws_url, open_timeout=5) as ws:
            assert len(_buffer_of(ws).frames) == 0
            assert not _shim_async.ws_pending(ws)
            assert await _shim_async.ws_wait_any([ws], 0.05) == set(), _broken("an empty buffer reads as ready", BUFFER)
            await ws.send('{"type":"reset"}')
            assert await _shim_async.ws_wait_any([ws], 10) == {0}
            assert _shim_async.ws_pending(ws), _broken("a buffered message reads as absent", BUFFER)
            await ws.recv()
            assert not _shim_async.ws_pending(ws)

    asyncio.run(main())


def test_sync_client_connection_internals_of_the_race_fixes(echo_server: EnvServer) -> None:
    for name in ("handshake", "send_data"):
        _require(SyncClientConnection, name, SYNC_RACES)
    with _shim_sync.ws_connect(echo_server.ws_url, open_timeout=5) as ws:
        thread = _require(ws, "recv_events_thread", SYNC_RACES)
        assert thread.is_alive(), _broken("recv_events_thread is not the running reader thread", SYNC_RACES)
        assert "handshake_exc" in vars(ws.protocol), _broken(
            "ClientProtocol has no handshake_exc attribute", SYNC_RACES
        )


def test_read_after_fail_finds_what_it_resumes() -> None:
    # server/_wscompat.read_after_fail (issue 32): Protocol.fail, the asyncio connection's transport, the
    # threading connection's assembler (its mutex, paused flag and resume callback)
    from websockets.sync.messages import Assembler

    assert callable(getattr(Protocol, "fail", None)), "Protocol.fail moved: read_after_fail wraps it"
    assembler = Assembler(pause=lambda: None, resume=lambda: None)
    for name in ("mutex", "paused", "resume"):
        assert hasattr(assembler, name), f"Assembler.{name} moved: read_after_fail resumes a paused reader with it"
    source = inspect.getsource(ServerConnection.__init__) + inspect.getsource(SyncClientConnection.__mro__[1])
    assert "recv_messages" in source, "the threading connection's assembler is no longer recv_messages"


def test_asyncio_server_handler_tasks_are_found() -> None:
    """`_wscompat.handler_tasks`: websockets 17's ``Server.handler_tasks``, or ``Server.handlers`` before it."""
    import asyncio

    from websockets.asyncio.client import connect as aconnect
    from websockets.asyncio.server import serve as aserve

    from openenv.server._wscompat import handler_tasks

    async def main() -> None:
        held = asyncio.Event()

        async def handler(connection: Any) -> None:
            held.set()
            await connection.wait_closed()

        async with aserve(handler, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            assert handler_tasks(server) == []
            async with aconnect(f"ws://127.0.0.1:{port}"):
                await held.wait()
                [task] = handler_tasks(server)
                assert isinstance(task, asyncio.Task) and not task.done()

    asyncio.run(main())
