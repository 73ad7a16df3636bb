"""uvicorn serving :func:`openenv.server.asgi.create_app` in a thread on 127.0.0.1 (for the fixtures)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


class AsgiServer:
    """``create_app(factory, **kwargs)`` under uvicorn on a free 127.0.0.1 port, in a daemon thread.

    ``handshake_timeout``, ``max_pending`` and ``log_level`` (``"warning"``) go to ``uvicorn_config()`` (the serve
    command's settings).
    """

    def __init__(self, factory: Any, **kwargs: Any) -> None:
        import uvicorn

        from openenv.server.asgi import create_app, uvicorn_config

        limits = {key: kwargs.pop(key) for key in ("handshake_timeout", "max_pending", "log_level") if key in kwargs}
        limits.setdefault("log_level", "warning")
        self.app = create_app(factory, **kwargs)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/ws"
        self.host = "127.0.0.1"
        # uvicorn_config's WebSocket protocol (websockets' sans-IO one, reading ahead): the serve command's
        config = uvicorn_config(self.app, lifespan="on", **limits)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)

    @property
    def protocol(self) -> Any:
        return self.app.state.protocol

    @property
    def active_sessions(self) -> int:
        return int(self.protocol.active_sessions)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._sock.close()
