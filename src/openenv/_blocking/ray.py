"""The Ray actor that serves one environment, and the option checks both ``RayProvider`` twins share.

Flavour-free and importable without Ray: ``ray`` is imported only by the
functions that talk to a cluster.  The actor class is importable by reference
(``openenv._blocking.ray:ServerActor``), so every node that runs one needs this
package installed (or shipped with ``runtime_env``).
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .._core.errors import InvalidOption, ProviderError
from .._core.loader import load_factory, load_object

__all__ = [
    "ACTOR_NAMESPACE",
    "ServerActor",
    "actor_class",
    "build_actor_options",
    "reservation",
    "ensure_ray",
    "new_actor_name",
    "public_host",
    "bind_address",
    "loopback_problem",
    "NODE_HOST",
]

#: The Ray namespace of every actor a ``RayProvider`` starts (named ``openenv-server-<hex>``).
ACTOR_NAMESPACE = "openenv"
ACTOR_PREFIX = "openenv-server-"
_INSTALL_HINT = "RayProvider needs Ray: pip install 'openenv-twin[ray]'"
_INIT_LOCK = threading.Lock()
_LOG_LINES = 200


def import_ray() -> Any:
    """``import ray``, or a [`ProviderError`][openenv.sync.ProviderError] that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ProviderError(f"{_INSTALL_HINT} ({exc})") from exc
    return ray


def ensure_ray(address: str | None) -> Any:
    """The ``ray`` module, connected: ``ray.init(address=address)`` first if this process has not called it.

    ``address=None`` is Ray's own default (``RAY_ADDRESS`` if set, else a new
    local Ray instance), as when a Ray task is submitted before ``ray.init``.
    """
    ray = import_ray()
    with _INIT_LOCK:  # two providers starting in parallel must not both call ray.init
        if not ray.is_initialized():
            try:
                ray.init(address=address)
            except Exception as exc:
                where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
                raise ProviderError(f"cannot connect to {where}: {type(exc).__name__}: {exc}") from exc
    return ray


def new_actor_name() -> str:
    """A unique actor name, ``openenv-server-<12 hex digits>``."""
    return ACTOR_PREFIX + uuid.uuid4().hex[:12]


def build_actor_options(
    *,
    name: str,
    num_cpus: float | None,
    num_gpus: float | None,
    memory: float | None,
    resources: Mapping[str, float] | None,
    runtime_env: Mapping[str, Any] | None,
    scheduling_strategy: Any,
    actor_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The keyword arguments of ``ServerActor.options(...)``; refuses what would leave an actor behind.

    Raises:
        InvalidOption: ``name`` (the provider names its actors itself: one name
            per provider), ``lifetime="detached"`` (a detached actor outlives the
            driver), or ``max_restarts`` (a restarted actor serves on a new port).
    """
    options: dict[str, Any] = {"name": name, "namespace": ACTOR_NAMESPACE, "max_restarts": 0}
    for key, value in (
        ("num_cpus", num_cpus),
        ("num_gpus", num_gpus),
        ("memory", memory),
        ("resources", dict(resources) if resources is not None else None),
        ("runtime_env", dict(runtime_env) if runtime_env is not None else None),
        ("scheduling_strategy", scheduling_strategy),
    ):
        if value is not None:
            options[key] = value
    extra = dict(actor_options or {})
    if "name" in extra:
        raise InvalidOption(
            f"actor_options name={extra['name']!r} is not supported: RayProvider names its actors itself "
            "(openenv-server-<hex>, one per provider), so that the providers of one factory in a pool, or a "
            "replacement, never collide; read the name from provider.actor_name"
        )
    if extra.get("lifetime") not in (None, "non_detached"):
        raise InvalidOption(
            f"actor_options lifetime={extra['lifetime']!r} is not supported: a detached actor outlives the "
            "driver and nothing would stop it; RayProvider's actors are owned by the driver"
        )
    if extra.get("max_restarts", 0) != 0:
        raise InvalidOption("actor_options max_restarts is not supported: a restarted actor would serve on a new port")
    options.update(extra)
    if options.get("scheduling_strategy") == "SPREAD" and not any(
        amount > 0 for amount in reservation(options).values()
    ):
        raise InvalidOption(
            "scheduling_strategy='SPREAD' spreads only actors that reserve a resource while they run, and this one "
            "reserves none (Ray places such an actor on a node picked at random, so servers end up sharing nodes): "
            "give it a reservation, such as resources={'env_slot': 1} with num_cpus=0 (each node offering "
            "env_slot), or num_cpus=1"
        )
    return options


def reservation(options: Mapping[str, Any]) -> dict[str, float]:
    """What an actor made with ``options`` holds while it lives, by Ray's rule for actors' defaults.

    An actor that names no resource but ``memory`` holds no CPU (it needs one only
    to be placed); one that names any other resource (``num_gpus``, a custom one)
    and no ``num_cpus`` holds 1 CPU for its whole life.
    """
    held: dict[str, float] = {}
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        if options.get(key) is not None:
            held[name] = options[key]
    held.update(options.get("resources") or {})
    if "CPU" not in held:
        held["CPU"] = 0 if set(held) <= {"memory"} else 1
    return held


_REMOTE: Any = None


def actor_class() -> Any:
    """``ray.remote(ServerActor)``, made once per process."""
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = import_ray().remote(ServerActor)
    return _REMOTE


#: ``RayProvider(host=NODE_HOST)``: bind the node's IP address (``ray.util.get_node_ip_address()``).
NODE_HOST = "node"


def bind_address(host: str | None, node_ip: str) -> str:
    """The address the actor's server binds: ``127.0.0.1`` unless ``host`` asks for another (``"node"``: its IP)."""
    if host is None:
        return "127.0.0.1"
    return node_ip if host == NODE_HOST else host


def _is_loopback(address: str) -> bool:
    return address == "localhost" or address == "::1" or address.startswith("127.")


def loopback_problem(bind: str, actor_node_ip: str, driver_node_ip: str) -> str | None:
    """Why a server bound to ``bind`` on the actor's node cannot be reached from the driver, or ``None``."""
    if not _is_loopback(bind) or actor_node_ip == driver_node_ip or bind == actor_node_ip:
        return None  # not loopback, this node, or the node's own address (a cluster on one machine)
    return (
        f"the Ray actor runs on node {actor_node_ip}, not on this machine ({driver_node_ip}), and its server "
        f"listens on {bind} there, which only that node can reach: pass host='node' to RayProvider to bind "
        f"the node's IP address (any machine that can reach {actor_node_ip} can then use the server, which "
        "has no authentication), or place the actor on this node"
    )


def public_host(bind: str, node_ip: str) -> str:
    """The host to put in the URL: the node's IP for a wildcard bind, else the bound address."""
    host = node_ip if bind in ("0.0.0.0", "::", "") else bind
    return f"[{host}]" if ":" in host else host


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
