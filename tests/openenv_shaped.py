"""Providers with OpenEnv's two shapes, written here (OpenEnv is never imported): they run our real embedded server.

Like OpenEnv's cloud providers, every method blocks and nothing is cancellable.
``RuntimeLike`` is a ``RuntimeProvider`` (``start``/``wait_for_ready(timeout_s)``/``stop``),
``ContainerLike`` a ``ContainerProvider`` (``start_container(image)``/``wait_for_ready(url, timeout_s)``/
``stop_container``, plus ``close``).  Knobs make them fail, block or serve under a path prefix.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from typing import Any

from openenv.server import EnvServer

from .envs import CounterEnv


class PrefixedServer:
    """Our ASGI app under uvicorn on 127.0.0.1, reachable only below ``/<prefix>`` (as OpenShell's route prefix)."""

    def __init__(self, prefix: str) -> None:
        import uvicorn

        from openenv.server.asgi import create_app, uvicorn_config

        inner = create_app(CounterEnv, max_sessions=4)

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            path = scope.get("path", "")
            if scope["type"] in ("http", "websocket") and not path.startswith(prefix + "/"):
                if scope["type"] == "http":
                    await send({"type": "http.response.start", "status": 404, "headers": []})
                    await send({"type": "http.response.body", "body": b"not under the prefix"})
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
            if scope["type"] in ("http", "websocket"):
                scope = {**scope, "path": path[len(prefix) :], "raw_path": path[len(prefix) :].encode()}
            await inner(scope, receive, send)

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}{prefix}"
        self._server = uvicorn.Server(uvicorn_config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._sock.close()


class RuntimeLike:
    """An OpenEnv ``RuntimeProvider`` look-alike serving our embedded server.

    Args:
        prefix: serve under this URL path prefix (uvicorn, a prefix-checking app).
        fail_start / fail_ready / fail_stop / fail_close: raise this from that method.
        hold_start / hold_ready / hold_stop: that method waits for this event (up to 30 s) first;
            ``in_start`` / ``in_ready`` / ``in_stop`` are set when it is entered.
    """

    def __init__(
        self,
        *,
        prefix: str = "",
        fail_start: BaseException | None = None,
        fail_ready: BaseException | None = None,
        fail_stop: BaseException | None = None,
        fail_close: BaseException | None = None,
        hold_start: threading.Event | None = None,
        hold_ready: threading.Event | None = None,
        hold_stop: threading.Event | None = None,
    ) -> None:
        self.prefix = prefix
        self.fail_start = fail_start
        self.fail_ready = fail_ready
        self.fail_stop = fail_stop
        self.fail_close = fail_close
        self.hold_start = hold_start
        self.hold_ready = hold_ready
        self.hold_stop = hold_stop
        self.in_ready = threading.Event()
        self.in_stop = threading.Event()
        self.server: Any = None
        self.url: str | None = None
        self.calls: list[str] = []
        self.in_start = threading.Event()
        self.start_kwargs: dict[str, Any] = {}
        self.lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self.server is not None

    def _serve(self) -> str:
        self.in_start.set()
        if self.hold_start is not None and not self.hold_start.wait(30):
            raise RuntimeError("start was never released (did the caller's event loop stall on it?)")
        if self.fail_start is not None:
            raise self.fail_start
        if self.prefix:
            server: Any = PrefixedServer(self.prefix)
            url = server.url
        else:
            server = EnvServer(CounterEnv, host="127.0.0.1", port=0, max_sessions=4).start()
            url = server.url
        with self.lock:
            self.server, self.url = server, url
        return str(url)

    def _wait(self, url: str, timeout_s: float) -> None:
        self.in_ready.set()
        if self.hold_ready is not None and not self.hold_ready.wait(30):
            raise RuntimeError("wait_for_ready was never released")
        if self.fail_ready is not None:
            raise self.fail_ready
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Server did not become ready within {timeout_s:.1f} seconds")
            time.sleep(0.02)

    def _halt(self) -> None:
        self.in_stop.set()
        if self.hold_stop is not None and not self.hold_stop.wait(30):
            raise RuntimeError("stop was never released")
        with self.lock:
            server, self.server = self.server, None
        if server is not None:
            server.stop()
        if self.fail_stop is not None:
            raise self.fail_stop

    # OpenEnv's RuntimeProvider methods
    def start(self, port: int | None = None, env_vars: dict[str, str] | None = None, **_: Any) -> str:
        self.calls.append("start")
        self.start_kwargs = {"port": port, "env_vars": env_vars}
        return self._serve()

    def wait_for_ready(self, timeout_s: float = 30.0) -> None:
        self.calls.append(f"wait_for_ready({timeout_s})")
        assert self.url is not None
        self._wait(self.url, timeout_s)

    def stop(self) -> None:
        self.calls.append("stop")
        self._halt()

    def close(self) -> None:
        self.calls.append("close")
        if self.fail_close is not None:
            raise self.fail_close


class ContainerLike(RuntimeLike):
    """An OpenEnv ``ContainerProvider`` look-alike (``start_container(image)``); ``image`` records what it got."""

    start = None  # type: ignore[assignment]  # not a RuntimeProvider
    stop = None  # type: ignore[assignment]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.image: str | None = None

    def start_container(
        self, image: str, port: int | None = None, env_vars: dict[str, str] | None = None, **_: Any
    ) -> str:
        self.calls.append("start_container")
        self.image = image
        self.start_kwargs = {"port": port, "env_vars": env_vars}
        return self._serve()

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:  # type: ignore[override]
        self.calls.append(f"wait_for_ready({timeout_s})")
        self._wait(base_url, timeout_s)

    def stop_container(self) -> None:
        self.calls.append("stop_container")
        self._halt()
