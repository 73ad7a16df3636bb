"""What both ``RayProvider`` twins share on the driver: the option checks, addresses and ``import ray``.

Flavour-free and importable without Ray: ``ray`` is imported only by the
functions that talk to a cluster.  The actor itself, code that runs on a Ray
node, has a room of its own: `openenv._ray_actor`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any

from .._core.errors import InvalidOption, ProviderError

__all__ = [
    "ACTOR_NAMESPACE",
    "import_ray",
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
