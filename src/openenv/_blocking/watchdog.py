"""A watchdog container that removes this program's containers when the whole job is killed.

The reaper (`openenv._blocking.lifetimes`) is a process of this program's job: a
Slurm job cancel, a Kubernetes pod kill or a cgroup kill ends it together with
its owner, and the containers would run on.  So, while a `DockerProvider`
holds a container, this program also keeps a TCP connection (its **lifeline**)
to one small **watchdog container**, run by the Docker engine, outside the
job's process tree and cgroup (the idea of testcontainers' Ryuk):

* it runs from the environment's own image (no extra image to pull), as
  ``python3 -c WATCHDOG`` (standard library only), with the engine's socket
  mounted and its port published on 127.0.0.1 only, with ``--rm``;
* it knows the labels of this program's containers (``org.openenv.pid`` and
  ``org.openenv.pid-start``) from its command line;
* when every connection is gone and none comes back within `GRACE` seconds,
  it force-removes every container with those labels (for a few seconds more,
  so that a create still in flight is caught), then exits;  after a ``bye``
  (a clean release) it just exits;
* it carries this program's identity labels, so ``python -m openenv prune``
  removes it like any other leftover once this program is gone.

One watchdog per owner process, started with the first container and removed
(synchronously) when the last one is released.  When the image has no
``python3``, or the engine's socket cannot be mounted (a remote ``DOCKER_HOST``),
a warning is logged and cleanup stays as before (atexit, reaper, ``prune``).
The watchdog holds the engine's socket (root on this machine), so it runs only
from an image this machine trusts: by default an image **built here** (no
registry digest: ``docker build``, ``scripts/docker_setup.py``), never one
pulled from a registry, whose ``python3`` could be anyone's.  For a pulled
image, an INFO line says so and cleanup stays as before, unless you choose:
``OPENENV_WATCHDOG_IMAGE`` names an image you trust to run it from instead (any
image with ``python3``), ``OPENENV_WATCHDOG=1`` trusts the environment's own
image, ``OPENENV_WATCHDOG=0`` turns the watchdog off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from .._core.containers import LABEL_MANAGED, LABEL_PID, LABEL_SESSION, MANAGED_VALUE, new_session_id
from .._core.lifetimes import LABEL_PID_START, identity_labels
from . import lifetimes as _lifetimes
from .procfs import owner_identity

__all__ = ["GRACE", "LABEL_ROLE", "WATCHDOG_ROLE", "acquire", "release"]

logger = logging.getLogger("openenv.docker")

#: Seconds without any connection after which the watchdog removes the containers.
GRACE = 1.0
#: The label that marks the watchdog itself (it never removes a container carrying it).
LABEL_ROLE = "org.openenv.role"
WATCHDOG_ROLE = "watchdog"
_PORT = 7373
_HELLO = b"openenv-watchdog\n"

#: The program run inside the container (``python3 -c``): standard library only.
SCRIPT = r"""
import http.client, json, os, select, socket, sys, time, urllib.parse
FILTERS = json.loads(sys.argv[1]); GRACE = float(sys.argv[2]); ROLE = sys.argv[3]
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect("/var/run/docker.sock")
def call(method, path):
    c = Unix("localhost")
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()
def sweep():
    q = urllib.parse.quote(json.dumps({"label": FILTERS}))
    status, body = call("GET", "/containers/json?all=1&filters=" + q)
    left = 0
    for row in json.loads(body) if status == 200 else []:
        labels = row.get("Labels") or {}
        if labels.get(ROLE.split("=")[0]) == ROLE.split("=")[1]:
            continue
        if all(labels.get(k) == v for k, v in (f.split("=", 1) for f in FILTERS)):
            left += 1
            call("DELETE", "/containers/" + row["Id"] + "?force=1&v=1")
    return left
try:
    assert call("GET", "/_ping")[0] == 200
except Exception as exc:
    print("no Docker engine at /var/run/docker.sock:", exc, flush=True)
    sys.exit(3)
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", int(sys.argv[4])))
server.listen(16)
conns, ever, clean = [], False, False
idle_since = time.monotonic()
while True:
    limit = GRACE if ever else 15.0
    if not conns and time.monotonic() - idle_since >= limit:
        break
    ready, _, _ = select.select([server, *conns], [], [], 0.2)
    for s in ready:
        if s is server:
            c, _ = server.accept()
            c.sendall(b"openenv-watchdog\n")
            conns.append(c); ever = True
            continue
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if b"bye" in data:
            clean = True
        if not data:
            conns.remove(s); s.close()
            idle_since = time.monotonic()
            if clean and not conns:
                sys.exit(0)
start = time.monotonic()
quiet = 0
while time.monotonic() - start < 30:
    try:
        quiet = quiet + 1 if sweep() == 0 else 0
    except Exception:
        quiet = 0
    if quiet >= 2 and time.monotonic() - start >= 2:
        break
    time.sleep(0.5)
"""

_lock = threading.Lock()
_owner = 0
_holders: set[int] = set()  # id() of each provider that holds it
_conn: socket.socket | None = None
_container: str | None = None
_client: Any = None
_lease: _lifetimes.Lease | None = None
_refused: set[str] = set()  # images that cannot run it: warned once
_untrusted: set[str] = set()  # images refused as pulled from a registry (said once each)


def _socket_path() -> str | None:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None
    return host[len("unix://") :]


def _filters() -> list[str]:
    pid = os.getpid()
    owner = owner_identity()
    filters = [f"{LABEL_MANAGED}={MANAGED_VALUE}", f"{LABEL_PID}={pid}"]
    if owner is not None and owner.pid == pid:
        filters.append(f"{LABEL_PID_START}={owner.start_time}")
    return filters


def _connect(port: int, deadline: float) -> socket.socket | None:
    """Connect until the watchdog says hello (docker-proxy accepts before the program listens)."""
    while time.monotonic() < deadline:
        conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            conn.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
            conn.connect(("127.0.0.1", port))
            hello = b""
            while not hello.endswith(b"\n") and len(hello) < 64:
                chunk = conn.recv(64)
                if not chunk:
                    break
                hello += chunk
            if hello == _HELLO:
                conn.settimeout(None)
                return conn
        except OSError:
            pass
        conn.close()
        time.sleep(0.05)
    return None


def _remove_by_name(name: str) -> None:
    """At exit: remove the watchdog if it is still there (only reached when something went wrong)."""
    from . import docker as _docker

    with contextlib.suppress(Exception):
        client = _docker.connect_client(30)
        try:
            _docker.remove_container(client, name)
        finally:
            client.close()


def _trusted(image: str, timeout: float | None) -> bool:
    """Whether the watchdog may run from ``image``: chosen by the user, or built on this machine."""
    if os.environ.get("OPENENV_WATCHDOG_IMAGE", "").strip():
        return True
    if os.environ.get("OPENENV_WATCHDOG", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    from . import docker as _docker

    try:
        client = _docker.connect_client(timeout)
    except Exception:  # noqa: BLE001 - then the start below says why
        return True
    try:
        digests = client.api.inspect_image(image).get("RepoDigests") or []
    except Exception:  # noqa: BLE001 - an image that cannot be inspected is not trusted
        return False
    finally:
        client.close()
    return not digests  # a registry digest: pulled (or pushed) somewhere, not only built here


def _start(image: str, timeout: float | None) -> bool:
    global _conn, _container, _client, _lease, _owner
    from . import docker as _docker

    path = _socket_path()
    if path is None:
        logger.warning(
            "openenv: DOCKER_HOST is not a unix socket: no watchdog container; containers are removed at exit "
            "and by the reaper, but not after a job-wide kill (run `python -m openenv prune`)"
        )
        _refused.add(image)
        return False
    if not _trusted(image, timeout):
        if image in _untrusted:  # said once per image; asked again each time (the user may trust it later)
            return False
        _untrusted.add(image)
        logger.info(
            "openenv: no watchdog container from %s: it was pulled from a registry, and the watchdog holds the "
            "Docker socket; set OPENENV_WATCHDOG_IMAGE to an image you trust (or OPENENV_WATCHDOG=1 to trust this "
            "one) for its containers to be removed after a job-wide kill too (else: `python -m openenv prune`)",
            image,
        )
        return False
    labels = {f.split("=", 1)[0]: f.split("=", 1)[1] for f in _filters()}
    owner = owner_identity()
    if owner is not None and owner.pid == os.getpid():
        labels.update(identity_labels(owner))
    labels[LABEL_ROLE] = WATCHDOG_ROLE
    name = f"openenv-watchdog-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    session = new_session_id()
    labels[LABEL_SESSION] = session
    container_id = None
    client = None
    # registered before it exists: the reaper removes it when only this process is killed, atexit if left
    lease = _lifetimes.lease_container(name, session, lambda: _remove_by_name(name), image=image)
    try:
        client = _docker.connect_client(timeout)
        created = client.api.create_container(
            image,
            command=[json.dumps(_filters()), str(GRACE), f"{LABEL_ROLE}={WATCHDOG_ROLE}", str(_PORT)],
            entrypoint=["python3", "-c", SCRIPT],
            name=name,
            labels=labels,
            user="0",
            ports=[_PORT],
            host_config=client.api.create_host_config(
                auto_remove=True,
                binds={path: {"bind": "/var/run/docker.sock", "mode": "rw"}},
                port_bindings={_PORT: ("127.0.0.1", None)},
            ),
        )
        container_id = str(created["Id"])
        client.api.start(container_id)
        attrs = client.api.inspect_container(container_id)
        bindings = ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).get(f"{_PORT}/tcp") or []
        if not bindings:
            raise RuntimeError("it exited at once (no python3 in the image, or no access to the Docker socket)")
        conn = _connect(int(bindings[0]["HostPort"]), time.monotonic() + 10.0)
        if conn is None:
            raise RuntimeError("it did not answer within 10 s")
    except BaseException as exc:  # Ctrl-C included: nothing of it may stay
        if client is not None:
            if container_id is not None:
                with contextlib.suppress(Exception):
                    client.api.remove_container(container_id, force=True)
            else:  # its create may have landed, or may still land
                _docker.reap_container(client, name, session, image, settle=30.0, hold=1.0)
            client.close()
        lease.release()
        if not isinstance(exc, Exception):
            raise
        _refused.add(image)
        logger.warning(
            "openenv: no watchdog container from %s (%s): its containers are removed at exit and by the reaper, "
            "but not after a job-wide kill (run `python -m openenv prune`)",
            image,
            exc,
        )
        return False
    _conn, _container, _client, _lease, _owner = conn, container_id, client, lease, os.getpid()
    return True


def acquire(holder: object, image: str, timeout: float | None = 60.0) -> bool:
    """Make ``holder`` hold this process's watchdog (started from ``image`` if none runs); True when it does.

    `release()` ``holder`` when its container is gone (idempotent, also after
    False).  Never raises for the watchdog's own failures: it logs a warning
    and returns False (a ``KeyboardInterrupt`` still propagates, with nothing
    of the watchdog left).
    """
    if os.environ.get("OPENENV_WATCHDOG", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    image = os.environ.get("OPENENV_WATCHDOG_IMAGE", "").strip() or image  # an image you trust with the socket
    with _lock:
        if not (_owner == os.getpid() and _conn is not None):
            if image in _refused or not _start(image, timeout):
                return False
            _holders.clear()
        _holders.add(id(holder))
        return True


def release(holder: object) -> None:
    """``holder`` no longer needs the watchdog; after the last one it is removed (synchronously)."""
    global _conn, _container, _client, _lease
    with _lock:
        if _owner != os.getpid() or _conn is None or id(holder) not in _holders:
            return
        _holders.discard(id(holder))
        if _holders:
            return
        conn, container, client, lease = _conn, _container, _client, _lease
        _conn = _container = _client = _lease = None
    try:
        client.api.remove_container(container, force=True)  # killed before it could sweep anything
    except Exception:  # noqa: BLE001 - then it is told to go away on its own
        with contextlib.suppress(OSError):
            conn.sendall(b"bye\n")
    finally:
        conn.close()
        client.close()
        if lease is not None:
            lease.release()


def _after_fork_in_child() -> None:
    global _lock, _conn, _container, _client, _lease
    _lock = threading.Lock()
    conn, _conn = _conn, None
    if conn is not None:
        with contextlib.suppress(OSError):
            os.close(conn.detach())  # only this copy: the parent's connection stays up
    _container = _client = _lease = None
    _holders.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
