"""The Ray actor that serves one environment: code that runs on a Ray node, not on the driver.

``RayProvider`` (both twins) starts it through `actor_class`; the actor class is
importable by reference (``openenv._ray_actor:ServerActor``), so every node that
runs one needs this package installed (or shipped with ``runtime_env``).  It
serves an `openenv.server.EnvServer` or an ASGI app under uvicorn, in a thread.
Importable without Ray: ``ray`` is imported only when a cluster is used.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ._blocking.ray import bind_address, import_ray, public_host
from ._core.loader import load_factory, load_object

__all__ = ["ServerActor", "actor_class"]

_LOG_LINES = 200


class _Tail(logging.Handler):
    """Keeps the process's last log lines (what ``RayProvider.logs()`` returns)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: collections.deque[str] = collections.deque(maxlen=_LOG_LINES)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # pragma: no cover - a broken record must not break the server
            self.handleError(record)


class ServerActor:
    """Runs in a Ray worker process: one environment server on the node's address.

    Either the embedded [`EnvServer`][openenv.server.EnvServer] for ``factory``
    (``"module:Factory"``, ``"echo"``, or a class/callable that Ray pickled), or
    the ASGI app ``app`` (``"module:attr"``) under uvicorn.  The server runs in
    a thread; ``ray.kill`` of the actor ends the process and the server with it.
    """

    def __init__(
        self,
        factory: str | Callable[[], Any] | None,
        app: str | None,
        max_sessions: int,
        host: str | None,
        server_options: Mapping[str, Any],
    ) -> None:
        self._factory = factory
        self._app = app
        self._max_sessions = max_sessions
        self._host = host
        self._server_options = dict(server_options)
        self._tail = _Tail()
        root = logging.getLogger()
        root.addHandler(self._tail)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        self._url: str | None = None
        self._node_ip: str | None = None
        self._bind: str | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Start the server (once) and return its URL, ``http://<node ip>:<port>``."""
        if self._url is not None:
            return self._url
        node_ip: str = import_ray().util.get_node_ip_address()
        self._node_ip = node_ip
        bind = bind_address(self._host, node_ip)
        self._bind = bind
        try:
            port = self._start_asgi(bind) if self._app is not None else self._start_embedded(bind)
        except BaseException:
            self._tail.lines.append("the server did not start:\n" + traceback.format_exc().rstrip())
            raise
        self._url = f"http://{public_host(bind, node_ip)}:{port}"
        logging.getLogger("openenv.ray").info("actor pid %d serves on %s", os.getpid(), self._url)
        return self._url

    def _start_embedded(self, bind: str) -> int:
        from openenv.server import EnvServer

        factory = load_factory(self._factory) if isinstance(self._factory, str) else self._factory
        assert factory is not None
        server = EnvServer(factory, host=bind, port=0, max_sessions=self._max_sessions, **self._server_options)
        server.start()
        self._server = server
        return server.port

    def _start_asgi(self, bind: str) -> int:
        try:
            import uvicorn
        except ImportError as exc:
            raise RuntimeError(f"serving an ASGI app needs uvicorn in the actor's environment ({exc})") from exc
        # OpenEnv's apps read their session limit from the environment when they are imported
        os.environ.setdefault("MAX_CONCURRENT_ENVS", str(self._max_sessions))
        assert self._app is not None
        app = load_object(self._app)
        sock = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET)
        sock.bind((bind, 0))
        port = int(sock.getsockname()[1])
        options = {"log_level": "info", **self._server_options}
        server = uvicorn.Server(uvicorn.Config(app, **options))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
        thread.start()
        while not server.started:  # the caller's start_timeout bounds this
            if not thread.is_alive():
                raise RuntimeError(f"uvicorn exited while starting {self._app!r}")
            time.sleep(0.01)
        self._server, self._thread = server, thread
        return port

    def status(self) -> dict[str, Any]:
        """``{"url": ..., "running": bool, "pid": ..., "node_ip": ..., "bind": ...}``."""
        if self._thread is not None:
            running = self._thread.is_alive()
        else:
            running = bool(self._server is not None and self._server.running)
        return {"url": self._url, "running": running, "pid": os.getpid(), "node_ip": self._node_ip, "bind": self._bind}

    def logs(self, lines: int = 20) -> str:
        """The last ``lines`` log lines of this process."""
        return "\n".join(list(self._tail.lines)[-lines:])


_REMOTE: Any = None


def actor_class() -> Any:
    """``ray.remote(ServerActor)``, made once per process."""
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = import_ray().remote(ServerActor)
    return _REMOTE
