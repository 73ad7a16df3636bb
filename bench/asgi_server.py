"""Our ASGI app (``openenv.server.asgi.create_app``) under uvicorn, for the server section.

``python bench/asgi_server.py MODULE:FACTORY --max-sessions N``: uvicorn with the
same settings as ``bench/released_server.py`` (one worker, no access log,
``log_level=warning``) on 127.0.0.1 and an ephemeral port, so the two ASGI
servers differ only by the app; with ``--serve``, uvicorn with
``openenv.server.asgi.uvicorn_config()``'s settings instead (what
``python -m openenv serve --asgi`` runs); ``--ws`` picks uvicorn's WebSocket
implementation. When it listens it prints ``serving NAME on
http://127.0.0.1:PORT`` on stderr, the line ``bench/run.py`` waits for.
"""

from __future__ import annotations

import argparse
import socket
import sys

import uvicorn

from openenv._core.loader import load_factory
from openenv.server.app import DEFAULT_MAX_PENDING
from openenv.server.asgi import create_app, uvicorn_config


def _serve_config(app: object, max_sessions: int, settings: dict[str, object]) -> uvicorn.Config:
    """``uvicorn_config()`` with the pending cap ``serve`` gives ``--max-sessions`` (twice it, at least 64)."""
    return uvicorn_config(app, max_pending=max(DEFAULT_MAX_PENDING, 2 * max_sessions), **settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("factory")
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--serve", action="store_true", help="uvicorn_config()'s settings (the serve command's)")
    parser.add_argument("--ws", help="uvicorn's WebSocket implementation (default: uvicorn's, or uvicorn_config()'s)")
    args = parser.parse_args()
    app = create_app(load_factory(args.factory), max_sessions=args.max_sessions)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    ws = {} if args.ws is None else {"ws": args.ws}
    settings = {"log_level": "warning", "access_log": False, **ws}
    config = _serve_config(app, args.max_sessions, settings) if args.serve else uvicorn.Config(app, **settings)
    server = uvicorn.Server(config)
    original_startup = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original_startup(sockets=sockets)
        print(f"serving {args.factory} (asgi) on http://127.0.0.1:{port}", file=sys.stderr, flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
