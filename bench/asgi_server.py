"""Our ASGI app (``openenv.server.asgi.create_app``) under uvicorn, for the server section.

``python bench/asgi_server.py MODULE:FACTORY --max-sessions N``: uvicorn with the
same settings as ``bench/released_server.py`` (one worker, no access log,
``log_level=warning``) on 127.0.0.1 and an ephemeral port, so the two ASGI
servers differ only by the app. When it listens it prints ``serving NAME on
http://127.0.0.1:PORT`` on stderr, the line ``bench/run.py`` waits for.
"""

from __future__ import annotations

import argparse
import socket
import sys

import uvicorn

from openenv._core.loader import load_factory
from openenv.server.asgi import create_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("factory")
    parser.add_argument("--max-sessions", type=int, default=64)
    args = parser.parse_args()
    app = create_app(load_factory(args.factory), max_sessions=args.max_sessions)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    original_startup = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original_startup(sockets=sockets)
        print(f"serving {args.factory} (asgi) on http://127.0.0.1:{port}", file=sys.stderr, flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
