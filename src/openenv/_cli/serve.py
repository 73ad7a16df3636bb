"""``serve``: serve an environment over the OpenEnv protocol."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any

from .._core.loader import ECHO, load_factory
from ._common import _integer, _port, _positive_or_zero, _seconds, _UsageError

#: The built-in demo environments allow 8 sessions unless told otherwise, like the OpenEnv servers
#: whose ``server/app.py`` reads ``MAX_CONCURRENT_ENVS`` (defaults 4 or 8); any other environment
#: gets 1, the default of ``EnvServer`` and of openenv-core's ``create_app``.
_BUILTIN_MAX_SESSIONS = 8
_BUILTINS = frozenset({ECHO, "openenv.server.tools_demo:ToolsDemoEnvironment"})


def _default_max_sessions(spec: str) -> int:
    """``--max-sessions`` when not given: ``$MAX_CONCURRENT_ENVS``, else 8 for the built-ins, else 1."""
    raw = os.environ.get("MAX_CONCURRENT_ENVS", "").strip()
    if not raw:
        return _BUILTIN_MAX_SESSIONS if (ECHO if spec == "echo" else spec) in _BUILTINS else 1
    try:
        value = int(raw)
    except ValueError:
        raise _UsageError(f"MAX_CONCURRENT_ENVS must be an integer, not {raw!r}") from None
    if value < 1:
        raise _UsageError(f"MAX_CONCURRENT_ENVS must be at least 1 (sessions at a time), not {value}")
    return value


def _cmd_serve(args: argparse.Namespace) -> int:
    from openenv.server import EnvServer

    if args.fd is not None and (args.host is not None or args.port is not None):
        raise _UsageError("--fd serves on the socket it names: leave out --host and --port")
    try:
        factory = load_factory(args.factory)
    except (ImportError, ValueError) as exc:
        print(f"error: cannot load {args.factory!r}: {exc}", file=sys.stderr)
        return 2
    max_sessions = args.max_sessions if args.max_sessions is not None else _default_max_sessions(args.factory)
    sock = None
    if args.fd is not None:
        from openenv.server._settings import listener_from_fd

        try:
            sock = listener_from_fd(args.fd)
        except ValueError as exc:
            print(f"error: --fd {args.fd}: {exc}", file=sys.stderr)
            return 2
    if args.host is None:
        args.host = "127.0.0.1"
    if args.port is None:
        args.port = 8000
    if args.asgi:
        return _serve_asgi(factory, args, max_sessions, sock)
    try:
        # from here the server owns sock: its stop() (or a failed start) closes it
        server = EnvServer(
            factory,
            host=args.host,
            port=args.port,
            sock=sock,
            max_sessions=max_sessions,
            idle_timeout=args.idle_timeout if args.idle_timeout > 0 else None,
            max_pending=args.max_pending,
            transport=args.transport,
            backlog=args.backlog,
        )
    except (TypeError, ValueError) as exc:
        if sock is not None:
            sock.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def ready(srv: EnvServer) -> None:
        print(f"serving {srv.name} on {srv.url}", file=sys.stderr, flush=True)  # the first line: what tools wait for
        if srv.transport == "threads":
            print(
                "note: the threads transport runs three threads per connection and is unfit for hundreds of "
                "clients opening at once (1,000 took up to 25 s); use --transport asyncio or --asgi for those",
                file=sys.stderr,
                flush=True,
            )

    try:
        server.serve_forever(on_ready=ready)
    except OSError as exc:
        where = f"--fd {args.fd}" if sock is not None else f"{args.host}:{args.port}"
        print(f"error: cannot serve on {where}: {exc}", file=sys.stderr)
        return 1
    return 0


def _serve_asgi(factory: Any, args: argparse.Namespace, max_sessions: int, sock: socket.socket | None) -> int:
    """``serve --asgi``: the ASGI app under uvicorn (``POST /reset``, ``/step``, ``/mcp`` included)."""
    try:
        return _serve_asgi_on(factory, args, max_sessions, sock)
    finally:
        if sock is not None:  # uvicorn closed it if it served; not if it never got that far
            sock.close()


def _serve_asgi_on(factory: Any, args: argparse.Namespace, max_sessions: int, sock: socket.socket | None) -> int:
    try:
        import uvicorn  # noqa: F401 - needed by uvicorn_config

        from openenv.server.app import DEFAULT_MAX_PENDING
        from openenv.server.asgi import create_app, serve, uvicorn_config
    except ImportError as exc:
        print(f"error: --asgi needs starlette and uvicorn (pip install 'openenv-twin[server]'): {exc}", file=sys.stderr)
        return 2
    try:
        app = create_app(factory, max_sessions=max_sessions, idle_timeout=args.idle_timeout or None)
        # the embedded server's limits: handshake timeout, --max-pending (openenv.server.asgi.uvicorn_config)
        max_pending = args.max_pending if args.max_pending is not None else max(DEFAULT_MAX_PENDING, 2 * max_sessions)
        config = uvicorn_config(
            app,
            host=args.host,
            port=args.port,
            max_pending=max_pending,
            log_level=args.log_level.lower(),
            backlog=args.backlog,
        )
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    name = app.state.protocol.name
    # with --fd, the socket itself (not uvicorn's fd=, which reopens it as AF_UNIX: no TCP_NODELAY on its connections)
    serve(config, on_ready=lambda url: print(f"serving {name} on {url}", file=sys.stderr, flush=True), sock=sock)
    return 0


_SERVE_EPILOG = """\
MODULE:FACTORY names an Environment subclass or a zero-argument callable
(dotted attributes allowed); 'echo' is the built-in echo environment. When the
server listens, one line "serving NAME on http://HOST:PORT" goes to stderr.
Stops on Ctrl-C or SIGTERM.

examples:
  %(prog)s echo --port 8000
  %(prog)s echo --fd 3          # a socket the parent bound (ProcessProvider's {fd})
  %(prog)s openenv.server.tools_demo:ToolsDemoEnvironment --port 0
  %(prog)s my_pkg.envs:ChessEnv --host 0.0.0.0 --max-sessions 8
"""


def add_parser(commands: Any, raw: type[argparse.HelpFormatter]) -> None:
    """The ``serve`` command."""
    p_serve = commands.add_parser(
        "serve",
        help="serve an environment over the OpenEnv protocol",
        description="Serve an environment with openenv.server.EnvServer until Ctrl-C or SIGTERM.",
        epilog=_SERVE_EPILOG,
        formatter_class=raw,
    )
    p_serve.add_argument("factory", metavar="MODULE:FACTORY", help="environment class or factory, or 'echo'")
    p_serve.add_argument("--host", default=None, help="interface to bind (default: 127.0.0.1)")
    p_serve.add_argument("--port", type=_port, default=None, help="TCP port, 0 for any (default: 8000)")
    p_serve.add_argument(
        "--fd",
        type=_positive_or_zero,
        default=None,
        metavar="N",
        help="serve on the bound TCP socket the parent handed down as file descriptor N, instead of "
        "--host/--port (as uvicorn --fd): no other program can take the port in between",
    )
    p_serve.add_argument(
        "--max-sessions",
        type=_integer,
        default=None,
        help="concurrent /ws sessions (default: $MAX_CONCURRENT_ENVS, else 8 for the built-in echo and tools demo,"
        " else 1)",
    )
    p_serve.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=300.0,
        help="close a session after this many seconds without a client message; 0: never (default: 300)",
    )
    p_serve.add_argument(
        "--max-pending",
        type=_integer,
        default=None,
        help="connections still in their handshake, at most; more get 503 at once "
        "(default: 64 or twice --max-sessions, whichever is larger)",
    )
    p_serve.add_argument(
        "--transport",
        choices=["asyncio", "threads"],
        default=None,
        help="asyncio: one event loop, a worker thread only per blocking session; threads: websockets' "
        "threading server, three threads per connection, unfit for hundreds of clients opening at once "
        "(default: $OPENENV_SERVER_TRANSPORT, else asyncio)",
    )
    p_serve.add_argument(
        "--backlog",
        type=_integer,
        default=2048,
        help="the listening socket's backlog: connects the kernel queues until accepted, so that a burst "
        "of them waits for no SYN retransmit (default: 2048, uvicorn's; capped by net.core.somaxconn)",
    )
    p_serve.add_argument(
        "--asgi",
        action="store_true",
        help="serve the ASGI app under uvicorn (POST /reset, /step, /mcp too; needs openenv-twin[server])",
    )
    p_serve.set_defaults(func=_cmd_serve)
