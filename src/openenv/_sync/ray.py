# GENERATED from src/openenv/_async/ray.py by scripts/run_unasync.py -- DO NOT EDIT.
"""A provider that runs each environment server in a Ray actor on a Ray cluster's nodes.

Ray is an optional extra (``pip install 'openenv-twin[ray]'``); importing this
module does not import it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._blocking import ray as _ray
from .._core.errors import InvalidOption, ProviderError, ReadinessTimeout
from .._core.options import check_timeout
from .._ray_actor import actor_class
from .._shim_sync import run_blocking, run_cleanup
from .providers import ServerProvider

__all__ = ["RayProvider"]


class RayProvider(ServerProvider):
    """Runs an environment server in a Ray actor; the client connects to it directly.

    The actor is placed by Ray's scheduler (with the resources and strategy
    given here), starts the server on a free port of its node, bound to
    ``127.0.0.1`` unless ``host`` says otherwise, and ``start`` returns its
    URL (``http://127.0.0.1:<port>``; with ``host="node"``,
    ``http://<node ip>:<port>``, the address the actor's node reports to Ray).
    The server has no authentication: whoever can reach its address can use
    it.  The default, loopback, suits a single-node cluster; on a multi-node
    cluster an actor placed on another node than the driver's makes ``start``
    fail with a [`ProviderError`][openenv.sync.ProviderError] that says to pass
    ``host="node"``.  The server is either:

    * the embedded [`EnvServer`][openenv.server.EnvServer] for ``factory``: an
      importable ``"module:Factory"`` (or ``"echo"``), or an
      [`Environment`][openenv.server.Environment] class or zero-argument
      callable, which Ray pickles (cloudpickle) and ships to the node; or
    * the ASGI app ``app`` (``"package.server.app:app"``, an OpenEnv
      environment's server), run with uvicorn, which the node must have.

    Every node that runs an actor needs ``openenv-twin`` (and the environment's
    code) importable: installed there, or shipped with ``runtime_env``
    (``{"pip": [...]}``, ``{"py_modules": [...]}``, ``{"working_dir": ...}``).

    Nothing is left behind: the actors are owned by this driver (never
    detached), ``stop`` kills the actor (``ray.kill``), and Ray kills every
    actor of a driver that exits or dies.  Each actor is named
    ``openenv-server-<hex>`` in the Ray namespace ``"openenv"``, so
    ``ray.util.list_named_actors(all_namespaces=True)`` lists the live ones.

    Constructing one is cheap (nothing talks to Ray before ``start``), and each
    instance runs one server, so it suits ``EnvPool.from_provider(lambda i: RayProvider(...))``.

    Args:
        factory: the environment to serve with the embedded server.
        app: instead of ``factory``, an ASGI app as ``"module:attribute"``,
            served with uvicorn (``MAX_CONCURRENT_ENVS`` is set to
            ``max_sessions`` in the actor unless its ``runtime_env`` sets it).
        max_sessions: the server's session limit.
        host: the address the server binds. ``"127.0.0.1"`` (default, also
            ``None``): only processes on the actor's node can connect.
            ``"node"``: the node's IP address (``ray.util.get_node_ip_address()``),
            for a multi-node cluster: every machine that can reach that
            address can use the server. ``"0.0.0.0"`` binds every interface
            (the URL names the node's IP); any other address binds that one.
        num_cpus: CPUs the actor reserves (default: Ray's default for actors,
            1 to be scheduled and 0 while it runs).
        num_gpus: GPUs the actor reserves.
        memory: bytes of memory the actor reserves.
        resources: custom resources the actor reserves, such as ``{"env_slot": 1}``.
            Naming any (or ``num_gpus``) without ``num_cpus`` makes Ray reserve
            1 CPU for the actor's whole life too; pass ``num_cpus=0`` to hold none.
        runtime_env: the actor's Ray runtime environment (``pip``, ``env_vars``, ...).
        scheduling_strategy: where to place it: ``"SPREAD"``, ``"DEFAULT"``, a
            ``PlacementGroupSchedulingStrategy`` or a ``NodeAffinitySchedulingStrategy``.
            ``"SPREAD"`` (Ray's best effort to put each actor on another node)
            needs the actor to reserve something while it runs (``num_cpus > 0``,
            ``num_gpus``, ``memory`` or a custom resource): Ray places an actor
            that reserves nothing on a node picked at random, so it is refused.
        actor_options: more keyword arguments of Ray's ``.options()``
            (``label_selector``, ``accelerator_type``, ...).  ``name`` is
            refused (each provider names its actor itself, see ``actor_name``),
            and so are ``lifetime="detached"`` and ``max_restarts``.
        server_options: more keyword arguments of ``EnvServer`` (``idle_timeout``,
            ``name``, ...) or, with ``app``, of ``uvicorn.Config``.
        address: the cluster to connect to (``ray.init(address=...)``, such as
            ``"auto"`` or ``"ray://head:10001"``) when this process has not
            called ``ray.init`` yet.  ``None``: Ray's own default, as for any Ray
            task: ``RAY_ADDRESS`` if set, else a new local Ray instance.
            Ignored once Ray is initialised.
        start_timeout: seconds for the actor to be placed and its server to
            listen (``None``: no limit).  An actor that asks for resources no
            node has free stays pending in Ray; this ends the wait.

    Raises:
        TypeError: neither or both of ``factory`` and ``app`` were given.
        InvalidOption: ``start_timeout`` or ``max_sessions`` is out of range,
            ``actor_options`` names the actor or would detach or restart it, or
            ``scheduling_strategy="SPREAD"`` is given for an actor that reserves nothing.
    """

    def __init__(
        self,
        factory: str | Callable[[], Any] | None = None,
        *,
        app: str | None = None,
        max_sessions: int = 1,
        host: str | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        resources: Mapping[str, float] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        scheduling_strategy: Any = None,
        actor_options: Mapping[str, Any] | None = None,
        server_options: Mapping[str, Any] | None = None,
        address: str | None = None,
        start_timeout: float | None = 60.0,
    ) -> None:
        if (factory is None) == (app is None):
            raise TypeError("give exactly one of factory (an environment to serve) and app (an ASGI app spec)")
        if app is not None and not isinstance(app, str):
            raise TypeError(f"app must be a 'module:attribute' string, not {type(app).__name__}")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise InvalidOption(f"max_sessions must be a positive int, not {max_sessions!r}")
        self.factory: str | Callable[[], Any] | None = factory
        self.app: str | None = app
        self.max_sessions: int = max_sessions
        self.host: str | None = host
        self.server_options: dict[str, Any] = dict(server_options or {})
        self.address: str | None = address
        self.start_timeout: float | None = check_timeout("start_timeout", start_timeout)
        self.actor_name: str = _ray.new_actor_name()
        self.options: dict[str, Any] = _ray.build_actor_options(
            name=self.actor_name,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            memory=memory,
            resources=resources,
            runtime_env=runtime_env,
            scheduling_strategy=scheduling_strategy,
            actor_options=actor_options,
        )
        self.url: str | None = None
        self._actor: Any = None
        self._lock = threading.Lock()
        self._stopped = False

    def __repr__(self) -> str:
        target = self.app if self.app is not None else self.factory
        if not isinstance(target, str):
            target = getattr(target, "__qualname__", type(target).__name__)
        return f"<RayProvider {target} actor={self.actor_name}>"

    def start(self) -> str:
        """Create the actor, wait until its server listens, and return its URL.

        Raises:
            ProviderError: Ray is not installed or no cluster could be reached,
                the actor died, or the server failed to start (the message
                says why, with the actor's error).
            ReadinessTimeout: the actor was not placed, or its server did not
                listen, within ``start_timeout`` seconds (the message lists the
                resources asked for and those free in the cluster).
        """
        return run_blocking(self._launch)

    def _launch(self) -> str:
        # in a worker thread: a cancelled caller still leaves the actor where stop() finds it
        ray = _ray.ensure_ray(self.address)
        with self._lock:
            if self._stopped:
                raise ProviderError(f"{self!r} was stopped while it started")
            self._actor = actor = (
                actor_class()
                .options(**self.options)
                .remote(self.factory, self.app, self.max_sessions, self.host, self.server_options)
            )
        try:
            url: str = ray.get(actor.start.remote(), timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            self._halt()
            raise ReadinessTimeout(
                f"the Ray actor {self.actor_name} did not start its server within {self.start_timeout} s; "
                + _placement_hint(ray, self.options)
            ) from None
        except ray.exceptions.RayTaskError as exc:
            self._halt()
            raise ProviderError(
                f"the Ray actor {self.actor_name} could not start the server for {_target(self)}: {_cause(exc)}"
            ) from None
        except ray.exceptions.RayError as exc:  # died, runtime_env setup failed, ...
            self._halt()
            raise ProviderError(f"the Ray actor {self.actor_name} failed: {_cause(exc)}") from None
        problem = self._unreachable(ray, actor)
        if problem is not None:
            self._halt()
            raise ProviderError(problem)
        self.url = url
        return url

    def _unreachable(self, ray: Any, actor: Any) -> str | None:
        """Why the driver cannot reach the actor's loopback server (it runs on another node), or ``None``."""
        try:
            status = ray.get(actor.status.remote(), timeout=10.0)
        except ray.exceptions.RayError:
            return None  # check() reports a dead actor
        bind, actor_ip = status.get("bind"), status.get("node_ip")
        if not isinstance(bind, str) or not isinstance(actor_ip, str):
            return None
        return _ray.loopback_problem(bind, actor_ip, ray.util.get_node_ip_address())

    def check(self) -> None:
        """Raise [`ProviderError`][openenv.sync.ProviderError] if the actor died or its server stopped."""
        if self._actor is not None:
            run_blocking(self._check)

    def _check(self) -> None:
        actor = self._actor
        if actor is None:
            return
        ray = _ray.import_ray()
        try:
            status = ray.get(actor.status.remote(), timeout=10.0)
        except ray.exceptions.GetTimeoutError:
            return  # busy, not known to be dead
        except ray.exceptions.RayError as exc:
            raise ProviderError(f"the Ray actor {self.actor_name} died: {_cause(exc)}") from None
        if not status.get("running"):
            logs = self._logs()
            raise ProviderError(
                f"the server in Ray actor {self.actor_name} stopped" + (f"; last log lines:\n{logs}" if logs else "")
            )

    def logs(self) -> str:
        """The actor's last log lines (empty if it is gone)."""
        if self._actor is None:
            return ""
        return run_blocking(self._logs)

    def _logs(self) -> str:
        actor = self._actor
        if actor is None:
            return ""
        ray = _ray.import_ray()
        try:
            text: str = ray.get(actor.logs.remote(), timeout=5.0)
        except ray.exceptions.RayError:
            return ""
        return text

    def stop(self) -> None:
        """Kill the actor (``ray.kill``), which ends its server; idempotent."""
        run_cleanup(self._halt)

    def _halt(self) -> None:
        with self._lock:
            self._stopped = True
            actor, self._actor = self._actor, None
        if actor is None:
            return
        try:
            _ray.import_ray().kill(actor, no_restart=True)
        except Exception:  # already dead, or Ray was shut down (which killed it)
            pass


def _target(provider: RayProvider) -> str:
    target = provider.app if provider.app is not None else provider.factory
    return repr(target) if isinstance(target, str) else getattr(target, "__qualname__", repr(target))


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _placement_hint(ray: Any, options: Mapping[str, Any]) -> str:
    asked = {name: amount for name, amount in _ray.reservation(options).items() if amount > 0}
    if not asked:
        return "Ray may not have placed it yet (the cluster is busy, or its runtime_env is still being set up)"
    try:
        free = ray.available_resources()
        total = ray.cluster_resources()
    except Exception:  # pragma: no cover - the hint is best effort
        return f"it asks for {asked}"
    now = {name: f"{free.get(name, 0):g} of {total.get(name, 0):g}" for name in asked}
    implicit = (
        " (the CPU is Ray's default for an actor that names other resources and no num_cpus: pass num_cpus=0 "
        "to hold none)"
        if "CPU" in asked and options.get("num_cpus") is None
        else ""
    )
    return (
        f"it holds {asked}{implicit} and the cluster has free (of total) {now}; Ray keeps an actor pending until "
        "a node can take it: free resources, add nodes, or ask for less"
    )
