"""docker-py steps as plain blocking functions, shared by both twins.

Each function is one coherent step (start a container and read its port, read
its status, tail its logs, remove it, ...).  The sync twin calls them
directly; the async twin calls each through ``run_blocking`` (one thread hop
per step).  Nothing here runs an event loop or sleeps.

docker-py is imported lazily, inside the functions, so ``import openenv`` never
imports ``docker``.  Errors are translated to `openenv._core.errors`:
``DockerUnavailable``, ``ImageNotFound``, ``ContainerExited``, ``PortNotPublished``
and the base ``ProviderError``.

Thread safety: whether one ``DockerClient`` may be used from several threads at
once is not documented (docker/docker-py#3229), so every function here holds a
per-client re-entrant lock for the duration of its Docker calls.  A client used
by one session at a time never waits on it.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._core.containers import (
    LABEL_MANAGED,
    LABEL_PID,
    LABEL_SESSION,
    MANAGED_FILTER,
    MANAGED_VALUE,
    parse_port_binding,
)
from .._core.errors import (
    ContainerExited,
    DockerUnavailable,
    ImageNotFound,
    PortNotPublished,
    ProviderError,
)
from .._core.lifetimes import REMOVE, container_verdict, identity_labels
from .procfs import here, owner_identity, process_start_time

if TYPE_CHECKING:  # pragma: no cover
    from docker import DockerClient

__all__ = [
    "ContainerInfo",
    "ContainerSummary",
    "STATUS_MISSING",
    "connect_client",
    "image_present",
    "pull_image",
    "pull_if_missing",
    "start_container",
    "container_status",
    "container_logs_tail",
    "remove_container",
    "list_managed",
    "prune_containers",
]

#: What `container_status()` reports for a container that no longer exists.
STATUS_MISSING = "missing"

_DAEMON_HINT = "start the Docker daemon (dockerd) or set DOCKER_HOST"

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ContainerInfo:
    """A started container and where its server can be reached.

    Attributes:
        id: the full container id.
        name: the container name (unique; see ``new_container_name``).
        host: the address to connect to (the bind address, or ``127.0.0.1``
            when the port was published on every interface).
        host_port: the host port Docker picked for the container port.
    """

    id: str
    name: str
    host: str
    host_port: int

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server (IPv6 hosts are bracketed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.host_port}"


@dataclass(frozen=True)
class ContainerSummary:
    """One SDK-managed container, as listed by `list_managed()`."""

    id: str
    name: str
    image: str
    #: Docker's state: ``created``, ``running``, ``exited``, ``dead``, ...
    state: str
    #: Docker's human status, e.g. ``Up 3 seconds`` or ``Exited (3) 1 minute ago``.
    status: str
    #: Unix time of creation.
    created: float
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def session_id(self) -> str | None:
        return self.labels.get(LABEL_SESSION)

    @property
    def pid(self) -> int | None:
        value = self.labels.get(LABEL_PID, "")
        return int(value) if value.isdigit() else None


# --------------------------------------------------------------------------- locking

_locks_guard = threading.Lock()
_locks: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()


def _lock(client: Any) -> threading.RLock:
    with _locks_guard:
        lock = _locks.get(client)
        if lock is None:
            lock = threading.RLock()
            _locks[client] = lock
        return lock


# One pull of an image at a time in this process (many providers of one image may start at once).
_image_locks: dict[tuple[str, str | None], threading.RLock] = {}


def _image_lock(image: str) -> threading.RLock:
    key = _split_reference(image)
    with _locks_guard:
        lock = _image_locks.get(key)
        if lock is None:
            lock = _image_locks[key] = threading.RLock()
        return lock


# --------------------------------------------------------------------------- error translation


def _docker_errors() -> Any:
    import docker.errors

    return docker.errors


def _redact_host(value: str) -> str:
    """Hide credentials in a ``scheme://user:pass@host`` DOCKER_HOST."""
    return re.sub(r"//[^/@]*@", "//***@", value)


def _explain(exc: BaseException) -> str:
    errors = _docker_errors()
    if isinstance(exc, errors.APIError):
        return str(exc.explanation or exc)
    return str(exc) or type(exc).__name__


def _is_connection_error(exc: BaseException) -> bool:
    try:
        import requests.exceptions as rexc
    except ImportError:  # pragma: no cover - docker-py depends on requests
        return isinstance(exc, (ConnectionError, TimeoutError))
    return isinstance(exc, (rexc.ConnectionError, rexc.Timeout, ConnectionError, TimeoutError))


def _provider_error(what: str, exc: BaseException) -> ProviderError:
    if _is_connection_error(exc):
        return DockerUnavailable(f"{what}: the Docker engine did not answer ({_explain(exc)}); {_DAEMON_HINT}")
    explained = _explain(exc)
    if "port is already allocated" in explained or "address already in use" in explained.lower():
        explained += "; the host port is taken: pass another port=, or none to let Docker pick a free one"
    return ProviderError(f"{what}: {explained}")


# --------------------------------------------------------------------------- client


_DEFAULT_HOST = "unix:///var/run/docker.sock"


def _probe_unix_socket(docker_host: str, timeout: float | None) -> str | None:
    """For a ``unix://`` host, try the socket ourselves; return the problem, or None.

    docker-py leaks its socket (a ResourceWarning) when connecting to a dead
    unix socket fails, and only then raises; checking first avoids that and
    answers faster.  Other schemes (tcp, ssh, npipe) are left to docker-py.
    """
    if not docker_host.startswith("unix://"):
        return None
    path = docker_host[len("unix://") :]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(min(timeout, 10.0) if timeout is not None else 10.0)
        sock.connect(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    finally:
        sock.close()
    return None


def connect_client(timeout: float | None = None) -> DockerClient:
    """A ``docker.DockerClient`` from the environment (``DOCKER_HOST`` etc.), checked with a ping.

    Args:
        timeout: seconds for every request of this client (docker-py's default,
            60 s, when ``None``).  It also bounds `remove_container()`.

    Raises:
        DockerUnavailable: docker-py is not installed, or no engine answered.
    """
    try:
        import docker
    except ImportError as exc:
        raise DockerUnavailable(
            "the Docker provider needs the 'docker' package: pip install 'openenv-twin[docker]'"
        ) from exc

    where = _redact_host(os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)")
    problem = _probe_unix_socket(os.environ.get("DOCKER_HOST") or _DEFAULT_HOST, timeout)
    if problem is not None:
        raise DockerUnavailable(f"no Docker engine answered at {where} ({problem}); {_DAEMON_HINT}")
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = timeout
    client = None
    try:
        client = docker.from_env(**kwargs)
        client.ping()
    except BaseException as exc:  # DockerException, requests errors, socket errors; Ctrl-C
        if client is not None:
            client.close()
        if not isinstance(exc, Exception):
            raise
        raise DockerUnavailable(f"no Docker engine answered at {where} ({_explain(exc)}); {_DAEMON_HINT}") from exc
    return client


# --------------------------------------------------------------------------- images


def image_present(client: DockerClient, image: str) -> bool:
    """Whether ``image`` (a name, ``name:tag``, digest reference or id) is present locally."""
    errors = _docker_errors()
    with _lock(client):
        try:
            client.api.inspect_image(image)
        except errors.NotFound:
            return False
        except Exception as exc:
            raise _provider_error(f"cannot inspect image {image}", exc) from exc
    return True


def _split_reference(image: str) -> tuple[str, str | None]:
    """``repo[:tag|@digest]`` -> (repo, tag-or-digest); the tag defaults to ``latest``.

    (docker-py would pull *every* tag of a repository given without a tag.)
    """
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(image)
    return repo, tag or "latest"


_NOT_FOUND = re.compile(
    r"not found|manifest unknown|does not exist|pull access denied|name unknown"
    r"|no such image|repository .* not found",
    re.IGNORECASE,
)


def _format_progress(event: Mapping[str, Any]) -> str | None:
    status = str(event.get("status") or "").strip()
    if not status:
        return None
    parts = [f"{event['id']}: {status}" if event.get("id") else status]
    if event.get("progress"):
        parts.append(str(event["progress"]))
    return " ".join(parts)


#: how to build the image the docs' examples use (``echo-env:latest``)
_DOCS_ECHO_IMAGE = "echo-env:latest"
_BUILD_DOCS_ECHO = "`python3 scripts/docker_setup.py --echo-only` in a checkout of openenv-twin"


def _pull_error(image: str, reason: str, not_found: bool, missing_locally: bool) -> ProviderError:
    """The error of a failed pull: short and actionable when the image is not there locally either."""
    if missing_locally:
        how = _BUILD_DOCS_ECHO if image == _DOCS_ECHO_IMAGE else f"`docker build -t {image} <its build folder>`"
        message = (
            f"image {image} is not available locally and could not be pulled ({reason}); "
            f"build it with {how}, or pull it where a registry is reachable"
        )
    elif not_found:
        message = f"image {image} not found in its registry: {reason}"
    else:
        message = f"pulling {image} failed: {reason}"
    return ImageNotFound(message, image) if not_found or missing_locally else ProviderError(message)


def pull_image(
    client: DockerClient,
    image: str,
    *,
    progress: Callable[[str], None] | None = None,
    _missing_locally: bool = False,
) -> str:
    """Pull ``image`` from its registry, streaming progress; return the local image id.

    A reference without a tag pulls ``:latest`` (never every tag).

    Args:
        progress: called with one human-readable line per progress event
            (``"<layer>: Downloading [==>   ] 1.2MB/30MB"``, ``"Status: ..."``);
            repeated identical lines are dropped.

    Raises:
        ImageNotFound: the registry does not have the repository or the tag
            (or, from `pull_if_missing`, any pull failure of an image that is
            not present locally: one line saying so and how to build it).
        DockerUnavailable: the engine did not answer.
        ProviderError: any other pull failure (network, auth, disk, ...).
    """
    errors = _docker_errors()
    repo, tag = _split_reference(image)
    with _image_lock(image), _lock(client):
        last: str | None = None
        failure: ProviderError | None = None
        try:
            stream: Iterator[dict[str, Any]] = client.api.pull(repo, tag=tag, stream=True, decode=True)
            for event in stream:
                if not isinstance(event, dict):
                    continue
                if event.get("error") or event.get("errorDetail"):
                    message = str(event.get("error") or (event.get("errorDetail") or {}).get("message", ""))
                    failure = _pull_error(image, message, bool(_NOT_FOUND.search(message)), _missing_locally)
                    break
                line = _format_progress(event)
                if progress is not None and line is not None and line != last:
                    progress(line)
                    last = line
        except errors.APIError as exc:
            not_found = isinstance(exc, errors.NotFound) or bool(_NOT_FOUND.search(_explain(exc)))
            failure = _pull_error(image, _explain(exc), not_found, _missing_locally)
            if not _missing_locally:
                raise failure from exc
        except Exception as exc:
            error = _provider_error(f"pulling {image} failed", exc)
            if _missing_locally and not isinstance(error, DockerUnavailable):
                failure = _pull_error(image, _explain(exc), False, True)
            else:
                raise error from exc
        if failure is not None:
            raise failure  # outside the except clauses: one line, no chain of docker-py's errors
        try:
            return str(client.api.inspect_image(image)["Id"])
        except errors.NotFound as exc:
            raise ImageNotFound(f"image {image} is absent after a successful pull", image) from exc
        except Exception as exc:
            raise _provider_error(f"cannot inspect pulled image {image}", exc) from exc


def pull_if_missing(
    client: DockerClient,
    image: str,
    *,
    progress: Callable[[str], None] | None = None,
) -> bool:
    """Pull ``image`` unless it is present locally; return whether it was pulled.

    Calls for the same image from several threads (several providers of one
    image starting at once) pull it once: the others wait for that pull and
    then find the image present.

    Raises:
        ImageNotFound: the image is not present locally and could not be
            pulled (the registry does not have it, or none is reachable): the
            message says so, quotes the pull's reason, and how to build it.
        DockerUnavailable: the engine did not answer.
    """
    with _image_lock(image):
        if image_present(client, image):
            return False
        pull_image(client, image, progress=progress, _missing_locally=True)
        return True


# --------------------------------------------------------------------------- containers


def _merge_environment(base: Any, extra: Mapping[str, Any] | None) -> dict[str, str] | None:
    env: dict[str, str] = {}
    if isinstance(base, Mapping):
        env.update({str(k): str(v) for k, v in base.items()})
    elif base:  # ["K=V", ...]
        for item in base:
            key, _, value = str(item).partition("=")
            env[key] = value
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    return env or None


def _remove_quietly(client: DockerClient, ref: str) -> None:
    """Best-effort forced removal during cleanup; never raises (except KeyboardInterrupt)."""
    try:
        client.api.remove_container(ref, force=True, v=True)
    except Exception:
        pass


def _remove_ours_by_name(client: DockerClient, name: str, session: str | None) -> None:
    """Remove ``name`` only if it carries our session label (create may have half-succeeded)."""
    try:
        attrs = client.api.inspect_container(name)
    except Exception:
        return
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    if labels.get(LABEL_MANAGED) == MANAGED_VALUE and labels.get(LABEL_SESSION) == session:
        _remove_quietly(client, attrs.get("Id") or name)


#: The label of the placeholder the reaper creates to claim a name (`reap_container()`).
LABEL_PLACEHOLDER = "org.openenv.placeholder"


def reap_container(
    client: DockerClient, name: str, session: str, image: str | None, *, settle: float = 30.0, hold: float = 2.0
) -> str:
    """Remove container ``name`` of ``session`` for a dead owner, once its ``docker create`` has settled.

    The owner registered the name before it asked for the container, so when it
    was killed a create may still be in flight: a name not found *yet* proves
    nothing.  So, until ``settle`` seconds have passed:

    * found, with our session label: removed (``"removed"``); with another
      label: someone else's, left alone (``"not ours"``);
    * not found: the name is claimed with a placeholder container of ``image``
      (created, never started).  If that create succeeds, a create of the
      owner that the engine is still working through fails on the name; the
      placeholder is held ``hold`` seconds for one that reaches the engine
      late, then removed (``"never created"``).  If it conflicts, the owner's
      create holds the name, and the loop looks again.  A missing image
      settles it too (the owner's create cannot succeed either).  Without
      ``image``, or when the placeholder cannot be made, it polls.

    Never raises (the reaper's last act); returns what happened, or ``"unsettled"``.
    """
    import time

    errors = _docker_errors()
    deadline = time.monotonic() + settle
    delay = 0.05
    while True:
        try:
            attrs = client.api.inspect_container(name)
        except errors.NotFound:
            attrs = None
        except Exception:  # the engine is busy or away: try again
            attrs = {}
        if attrs:
            labels = (attrs.get("Config") or {}).get("Labels") or {}
            if labels.get(LABEL_MANAGED) == MANAGED_VALUE and labels.get(LABEL_SESSION) == session:
                _remove_quietly(client, attrs.get("Id") or name)
                if labels.get(LABEL_PLACEHOLDER) != "1":
                    return "removed"
                return "never created"  # our own placeholder of an earlier round
            return "not ours"
        if attrs is None and image and _claim(client, name, session, image, errors, hold):
            return "never created"
        if time.monotonic() >= deadline:
            return "unsettled"
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def _claim(client: DockerClient, name: str, session: str, image: str, errors: Any, hold: float) -> bool:
    """Create, hold and remove a placeholder named ``name``; whether this settled that nobody else has it."""
    import time

    labels = {LABEL_MANAGED: MANAGED_VALUE, LABEL_SESSION: session, LABEL_PLACEHOLDER: "1", LABEL_PID: str(os.getpid())}
    owner = owner_identity()
    if owner is not None:  # the reaper's own: prune removes it if the reaper dies right here
        labels.update(identity_labels(owner))
    try:
        created = client.api.create_container(image, command=["true"], name=name, labels=labels)
    except errors.APIError as exc:
        if exc.status_code == 404:  # no such image: the owner's create cannot have succeeded either
            return True
        return False  # 409: the name is taken (by the owner's create, most likely); look again
    except Exception:
        return False
    time.sleep(hold)
    _remove_quietly(client, str(created.get("Id") or name))
    return True


def _state(attrs: Mapping[str, Any]) -> tuple[str, int | None]:
    state = attrs.get("State") or {}
    status = str(state.get("Status") or "unknown")
    code = state.get("ExitCode")
    if status in ("running", "created", "restarting", "paused") or not isinstance(code, int):
        return status, None
    return status, code


def _logs(client: DockerClient, ref: str, lines: int) -> str:
    raw = client.api.logs(ref, stdout=True, stderr=True, tail=max(int(lines), 1), timestamps=False)
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return str(raw)


_RESERVED_RUN_OPTIONS = frozenset({"image", "name", "detach", "stdout", "stderr", "remove"})


def start_container(
    client: DockerClient,
    image: str,
    *,
    name: str,
    labels: Mapping[str, str],
    environment: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    container_port: int = 8000,
    run_options: Mapping[str, Any] | None = None,
) -> ContainerInfo:
    """Create and start a detached container, publish its port, and read the host port back.

    ``container_port`` is published on ``host`` with a port Docker picks (no
    free-port guessing, so no race); the port is read from the container's
    attributes after a reload.  The image is never pulled implicitly: call
    `pull_image()` first when `image_present()` says it is missing.

    Args:
        name: the container name (make it with ``new_container_name``).
        labels: the container labels (make them with ``container_labels``);
            cleanup after a failed create relies on its ``org.openenv.session``.
            When its ``org.openenv.pid`` is this process, the owner's identity
            is added (`openenv._core.lifetimes.identity_labels`).
        environment: environment variables; they override ``run_options["environment"]``.
        host: the host address to publish on (``127.0.0.1`` unless the caller
            asks otherwise; ``0.0.0.0`` publishes on every interface).
        run_options: extra keyword arguments of docker-py's ``containers.create``
            (``command``, ``mem_limit``, ``network``, ``volumes``, ...).  Their
            ``labels`` and ``ports`` are merged under ours; ``image``, ``name``,
            ``detach`` and ``remove`` may not be given.

    Returns:
        a `ContainerInfo` with the host and port to connect to.

    Raises:
        ImageNotFound: the image is not present locally.
        ContainerExited: the container stopped right after it started (its
            exit code and last log lines are attached); it has been removed.
        ProviderError: any other failure (for example the name is taken).
            The container, if it was created, has been removed.
    """
    errors = _docker_errors()
    opts: dict[str, Any] = dict(run_options or {})
    bad = _RESERVED_RUN_OPTIONS.intersection(opts)
    if bad:
        raise ValueError(f"run_options may not set {', '.join(sorted(bad))}")
    port_key = f"{container_port}/tcp"
    merged_labels = {str(k): str(v) for k, v in (opts.pop("labels", None) or {}).items()}
    merged_labels.update({str(k): str(v) for k, v in labels.items()})
    owner = owner_identity()
    if owner is not None and merged_labels.get(LABEL_PID) == str(owner.pid):
        # who started it, so that prune removes it only once that program of this host is gone
        merged_labels.update(identity_labels(owner))
    ports = dict(opts.pop("ports", None) or {})
    ports.setdefault(port_key, (host, None))  # a fixed port from the caller, else None: Docker picks one
    env = _merge_environment(opts.pop("environment", None), environment)
    command = opts.pop("command", None)
    session = merged_labels.get(LABEL_SESSION)

    with _lock(client):
        # 1. create (name and labels are fixed before any IO, so a killed process never leaks an unnamed container)
        try:
            created = client.containers.create(
                image,
                command,
                name=name,
                labels=merged_labels,
                ports=ports,
                environment=env,
                detach=True,
                **opts,
            )
            container_id = str(created.id)
        except errors.ImageNotFound as exc:
            raise ImageNotFound(
                f"image {image} is not present locally; pull it (`docker pull`, or pull=True) or build it",
                image,
            ) from exc
        except errors.APIError as exc:
            if exc.status_code == 404 and "image" in _explain(exc).lower():
                raise ImageNotFound(
                    f"image {image} is not present locally; pull it (`docker pull`, or pull=True) or build it",
                    image,
                ) from exc
            if exc.status_code == 409:  # the name belongs to someone else's container: leave it alone
                raise ProviderError(f"cannot create container {name}: {_explain(exc)}") from exc
            _remove_ours_by_name(client, name, session)
            raise ProviderError(f"cannot create container {name} from {image}: {_explain(exc)}") from exc
        except BaseException as exc:
            # A timeout or Ctrl-C may land before the engine created it, while it does, or after: a name not
            # found yet proves nothing (a loaded CI engine created one after a single look had missed it).
            # The reaper's settling look claims the name if nobody has it, or removes ours once it is there.
            if session is None or isinstance(exc, TypeError):  # TypeError: bad run_options, nothing sent
                _remove_ours_by_name(client, name, session)
            else:
                reap_container(client, name, session, image, settle=30.0, hold=1.0)
            if isinstance(exc, Exception) and not isinstance(exc, TypeError):
                raise _provider_error(f"cannot create container {name} from {image}", exc) from exc
            raise

        # 2. start, reload, read the port; remove on any failure
        try:
            client.api.start(container_id)
            attrs = client.api.inspect_container(container_id)
            status, exit_code = _state(attrs)
            if status in ("exited", "dead"):
                raise ContainerExited(name, exit_code, _logs(client, container_id, 20), status=status)
            try:
                host_port = parse_port_binding((attrs.get("NetworkSettings") or {}).get("Ports"), container_port)
            except PortNotPublished:
                # it may have died between start and inspect: report that instead
                attrs = client.api.inspect_container(container_id)
                status, exit_code = _state(attrs)
                if status in ("exited", "dead"):
                    raise ContainerExited(name, exit_code, _logs(client, container_id, 20), status=status) from None
                raise
        except BaseException as exc:
            _remove_quietly(client, container_id)
            if isinstance(exc, (ProviderError, ValueError)) or not isinstance(exc, Exception):
                raise
            raise _provider_error(f"cannot start container {name} from {image}", exc) from exc

    connect_host = "127.0.0.1" if host in ("", "0.0.0.0") else ("::1" if host == "::" else host)
    return ContainerInfo(id=container_id, name=name, host=connect_host, host_port=host_port)


def container_status(client: DockerClient, container: str) -> tuple[str, int | None]:
    """``(status, exit_code)`` of a container.

    ``status`` is Docker's state (``created``, ``running``, ``restarting``,
    ``paused``, ``exited``, ``dead``, ``removing``) or `STATUS_MISSING`
    when the container no longer exists.  ``exit_code`` is ``None`` unless the
    container has stopped.
    """
    errors = _docker_errors()
    with _lock(client):
        try:
            attrs = client.api.inspect_container(container)
        except errors.NotFound:
            return STATUS_MISSING, None
        except Exception as exc:
            raise _provider_error(f"cannot inspect container {container}", exc) from exc
    return _state(attrs)


def container_logs_tail(client: DockerClient, container: str, lines: int = 20) -> str:
    """The last ``lines`` lines of the container's stdout and stderr, interleaved.

    ``""`` when the container is gone.
    """
    errors = _docker_errors()
    with _lock(client):
        try:
            return _logs(client, container, lines)
        except errors.NotFound:
            return ""
        except Exception as exc:
            raise _provider_error(f"cannot read the logs of container {container}", exc) from exc


def remove_container(client: DockerClient, container: str) -> bool:
    """Force-remove a container (kill + remove, with its anonymous volumes).

    Idempotent: a container that is already gone, or whose removal is already
    in progress, is not an error.  Bounded by the client's request timeout
    (see `connect_client()`).  Returns whether this call removed it.
    """
    errors = _docker_errors()
    with _lock(client):
        try:
            client.api.remove_container(container, force=True, v=True)
        except errors.NotFound:
            return False
        except errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in _explain(exc):
                return False
            raise ProviderError(f"cannot remove container {container}: {_explain(exc)}") from exc
        except Exception as exc:
            raise _provider_error(f"cannot remove container {container}", exc) from exc
    return True


# --------------------------------------------------------------------- managed containers (prune)


def list_managed(
    client: DockerClient,
    *,
    all_processes: bool = True,
    session_id: str | None = None,
    label_filters: Sequence[str] = (),
) -> list[ContainerSummary]:
    """Every container (running or not) labelled ``org.openenv.managed=1``.

    Args:
        all_processes: ``False`` keeps only the containers this process started
            (``org.openenv.pid`` equal to ``os.getpid()``).
        session_id: keep only the container of this session.
        label_filters: more ``key=value`` labels they must all carry.
    """
    filters = [MANAGED_FILTER, *label_filters]
    if not all_processes:
        filters.append(f"{LABEL_PID}={os.getpid()}")
    if session_id is not None:
        filters.append(f"{LABEL_SESSION}={session_id}")
    with _lock(client):
        try:
            rows = client.api.containers(all=True, filters={"label": filters})
        except Exception as exc:
            raise _provider_error("cannot list containers", exc) from exc
    result = []
    for row in rows or []:
        labels = {str(k): str(v) for k, v in (row.get("Labels") or {}).items()}
        if labels.get(LABEL_MANAGED) != MANAGED_VALUE:  # never trust the filter alone
            continue
        names = row.get("Names") or []
        name = str(names[0]).lstrip("/") if names else str(row.get("Id", ""))[:12]
        result.append(
            ContainerSummary(
                id=str(row.get("Id", "")),
                name=name,
                image=str(row.get("Image", "")),
                state=str(row.get("State", "")),
                status=str(row.get("Status", "")),
                created=float(row.get("Created") or 0),
                labels=labels,
            )
        )
    return result


def prune_containers(
    client: Any, *, everything: bool = False, dry_run: bool = False, label_filters: Sequence[str] = ()
) -> list[tuple[Any, str, str]]:
    """Apply ``prune`` to the engine's managed containers; return each with its verdict and why.

    Args:
        client: a docker-py client.
        everything: ``--all``: remove every container labelled ``org.openenv.managed=1``.
        dry_run: change nothing.
        label_filters: only containers that also carry these ``key=value`` labels.

    Verdicts (`openenv._core.lifetimes.container_verdict`): ``keep`` (its owner
    runs), ``remove`` (it provably belongs to a dead program of this host, boot
    and PID namespace; removed unless ``dry_run``), ``foreign`` (anything else:
    another host, boot or namespace, or labels without a full owner identity;
    left alone unless ``everything``).

    Raises:
        ProviderError: listing failed, or a removal failed (after every other
            container was tried).
    """
    facts = here()
    results: list[tuple[Any, str, str]] = []
    failures = []
    for summary in list_managed(client, label_filters=label_filters):
        pid = summary.pid
        start_now = process_start_time(pid) if pid is not None else None
        verdict, why = container_verdict(summary.labels, here=facts, start_time_now=start_now, everything=everything)
        if verdict == REMOVE and not dry_run:
            try:
                remove_container(client, summary.id)
            except ProviderError as exc:
                failures.append(f"{summary.name}: {exc}")
        results.append((summary, verdict, why))
    if failures:
        raise ProviderError("could not remove: " + "; ".join(failures))
    return results
