"""Container names, labels and port bindings: sans-IO rules shared by every provider.

Nothing here talks to Docker.  The blocking steps in `openenv._blocking.docker`
and the providers build on these so that every container the SDK starts can be
found again (by label) and removed, even after the process that started it died.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from typing import Any

from .errors import PortNotPublished

__all__ = [
    "LABEL_MANAGED",
    "LABEL_VERSION",
    "LABEL_PID",
    "LABEL_SESSION",
    "MANAGED_VALUE",
    "MANAGED_FILTER",
    "new_container_name",
    "new_session_id",
    "container_labels",
    "parse_port_binding",
    "PortNotPublished",
]

#: Every container the SDK starts carries ``org.openenv.managed=1``.
LABEL_MANAGED = "org.openenv.managed"
#: The ``openenv`` version that started the container.
LABEL_VERSION = "org.openenv.version"
#: The process id of the owner, for finding strays of dead processes.
LABEL_PID = "org.openenv.pid"
#: The session id the container serves (one per ``from_docker_image`` call).
LABEL_SESSION = "org.openenv.session"

MANAGED_VALUE = "1"
#: ``filters={"label": MANAGED_FILTER}`` selects the SDK's containers.
MANAGED_FILTER = f"{LABEL_MANAGED}={MANAGED_VALUE}"

_NAME_PREFIX = "openenv"
# Docker container names: [a-zA-Z0-9][a-zA-Z0-9_.-]+
_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
_MAX_BASE = 40


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openenv-twin")
    except PackageNotFoundError:
        return "unknown"


def new_session_id() -> str:
    """A fresh random session id (12 hex characters)."""
    return secrets.token_hex(6)


def _image_basename(image: str) -> str:
    """``registry:5000/org/name:tag@sha256:...`` -> ``name``."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def new_container_name(image: str, *, pid: int | None = None, suffix: str | None = None) -> str:
    """A unique, valid Docker container name for a container of ``image``.

    ``openenv-<image basename>-<pid>-<6 hex>``; the basename is sanitised to
    Docker's alphabet and shortened.  ``pid`` and ``suffix`` default to this
    process's id and a random token (parameters exist for tests).

    >>> new_container_name("registry.hf.space/openenv-echo-env:latest", pid=42, suffix="abc123")
    'openenv-openenv-echo-env-42-abc123'
    """
    base = _UNSAFE.sub("-", _image_basename(image)).strip("-_.")[:_MAX_BASE].strip("-_.")
    pid = os.getpid() if pid is None else pid
    suffix = secrets.token_hex(3) if suffix is None else suffix
    parts = [_NAME_PREFIX, base, str(pid), suffix] if base else [_NAME_PREFIX, str(pid), suffix]
    return "-".join(parts)


def container_labels(
    session_id: str, *, pid: int | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The labels of a container the SDK starts for ``session_id``.

    ``extra`` labels are added first, so they can never override ours.
    """
    labels: dict[str, str] = {str(k): str(v) for k, v in (extra or {}).items()}
    labels.update(
        {
            LABEL_MANAGED: MANAGED_VALUE,
            LABEL_VERSION: _version(),
            LABEL_PID: str(os.getpid() if pid is None else pid),
            LABEL_SESSION: str(session_id),
        }
    )
    return labels


def _normalise_port(container_port: Any) -> str:
    text = str(container_port)
    return text if "/" in text else f"{text}/tcp"


def parse_port_binding(ports_attr: Mapping[str, Any] | None, container_port: Any = 8000) -> int:
    """The host port published for ``container_port``.

    ``ports_attr`` has the shape of Docker's ``NetworkSettings.Ports`` (what
    docker-py's ``container.ports`` returns):

    ```python
    {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "49153"}], "9000/tcp": None}
    ```

    A binding on ``127.0.0.1`` is preferred, then any other IPv4 one, then the
    first.  Raises [`PortNotPublished`][openenv._core.errors.PortNotPublished] (a ``ProviderError``
    and ``LookupError``) when the port
    is not published (absent, ``None`` or empty), and ``ValueError`` for a
    binding whose ``HostPort`` is not a port number.
    """
    key = _normalise_port(container_port)
    bindings = (ports_attr or {}).get(key)
    if not bindings:
        known = sorted((ports_attr or {}).keys())
        raise PortNotPublished(
            f"container port {key} is not published to the host"
            + (f" (ports: {', '.join(known)})" if known else " (no ports at all)")
            + "; was the container started with ports={...} and is it still running?"
        )

    def rank(binding: Mapping[str, Any]) -> int:
        ip = str(binding.get("HostIp") or "")
        if ip == "127.0.0.1":
            return 0
        if ip in ("", "0.0.0.0"):
            return 1
        if ":" not in ip:
            return 2
        return 3

    chosen = sorted((b for b in bindings if isinstance(b, Mapping)), key=rank)
    if not chosen:
        raise PortNotPublished(f"container port {key} has no usable binding: {bindings!r}")
    raw = chosen[0].get("HostPort")
    try:
        port = int(str(raw))
    except ValueError:
        raise ValueError(f"container port {key} has a malformed host port {raw!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"container port {key} has an out-of-range host port {port}")
    return port
