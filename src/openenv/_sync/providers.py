# GENERATED from src/openenv/_async/providers.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Providers start an environment server, wait until it is ready, and stop it.

``Env.from_provider`` drives any object with the [`Provider`][openenv.sync.Provider] methods;
``Env.from_docker_image`` and ``Env.from_env`` use the built-in ones.  Write
your own (Kubernetes, a cloud sandbox) by subclassing [`ServerProvider`][openenv.sync.ServerProvider]
or by implementing the three methods, in the flavour of the ``Env`` you use.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._adapters import http_error
from .._blocking import checkout as _checkout
from .._blocking import docker as _docker
from .._blocking import lifetimes as _lifetimes
from .._blocking import process as _process
from .._blocking import watchdog as _watchdog
from .._blocking.retry import Deadline, backoff
from .._core.checkout import uvicorn_command
from .._core.containers import container_labels, new_container_name, new_session_id
from .._core.errors import ContainerExited, ProviderError, ReadinessTimeout, exception_line
from .._core.options import ClientOptions, VerifyTypes, check_timeout
from .._core.urls import parse_base_url, redact_url
from .._shim_sync import run_blocking, run_cleanup, run_settled, sleep
from .http import http_client

__all__ = ["Provider", "ServerProvider", "DockerProvider", "ProcessProvider", "CheckoutProvider"]


@runtime_checkable
class Provider(Protocol):
    """What [`Env.from_provider()`][openenv.sync.Env.from_provider] needs from a provider.

    Any object with these three methods will do (a structural protocol: no
    need to subclass it); [`ServerProvider`][openenv.sync.ServerProvider]
    supplies ``wait_until_ready``.  ``from_provider`` calls ``start``, then
    ``wait_until_ready``, then connects; it calls ``stop`` on every failure,
    and [`Env.close()`][openenv.sync.Env.close] calls it at the end.
    """

    def start(self) -> str:
        """Start the server (a container, a process, ...) and return its base URL.

        Returns:
            The server's ``http://`` or ``https://`` base URL, such as
            ``"http://127.0.0.1:49153"``.

        Raises:
            ProviderError: the server could not be started; any subclass of it
                (``DockerUnavailable``, ``ImageNotFound``, ...) says why.
        """
        ...

    def wait_until_ready(self, base_url: str, timeout: float | None) -> None:
        """Return once the server at ``base_url`` answers; raise, saying why, if it never does.

        Args:
            base_url: what ``start`` returned.
            timeout: seconds to wait (``None`` or ``inf``: no limit).

        Raises:
            ReadinessTimeout: no healthy answer within ``timeout`` seconds
                (with the server's last log lines when known).
            ContainerExited: the server died while starting (or another
                ``ProviderError`` that says why).
        """
        ...

    def stop(self) -> None:
        """Stop the server and remove what ``start`` created (container, process, files).

        Must be idempotent and safe to call after a failed or interrupted
        ``start``, and should not raise for a server that is already gone.
        """
        ...


_POLL_TIMEOUT = 2.0  # seconds one readiness poll may take (less when the deadline is nearer)
_NO_ANSWER = "no answer yet"


class ServerProvider:
    """Base class with the readiness loop: poll ``GET /health`` with a short backoff.

    Subclasses implement ``start`` and ``stop``, and may override ``check``
    (raise when the server died, so waiting ends at once with the reason) and
    ``logs`` (the server's last output, attached to a readiness timeout).

    A client's ``verify=`` (``Env.from_provider(provider, verify=...)``, the
    pools' constructors) reaches the health checks of ``wait_until_ready``
    without changing the provider object (it is passed along, never set on
    it).  A subclass that overrides ``wait_until_ready`` does its own checks
    (its ``super()`` call uses the ``verify`` attribute).

    Attributes:
        verify: how the health checks of an ``https`` server check its
            certificate, when the client gives no ``verify=`` (as ``Env(verify=...)``).
    """

    verify: VerifyTypes = True
    _stopped: bool = False  # set by the built-in providers' stop(): ends a readiness wait at once

    def start(self) -> str:
        """Start the server and return its base URL (see [`Provider.start()`][openenv.sync.Provider.start])."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the server; idempotent (see [`Provider.stop()`][openenv.sync.Provider.stop])."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise if the server is known to be dead; the default knows nothing."""

    def logs(self) -> str:
        """The server's last output lines, if known."""
        return ""

    def wait_until_ready(self, base_url: str, timeout: float | None) -> None:
        """Poll ``GET <base_url>/health`` until it answers 200.

        Args:
            base_url: the server's base URL.
            timeout: seconds to wait (``None`` or ``inf``: no limit).

        Raises:
            InvalidOption: ``timeout`` is ``nan``, zero or negative.
            ContainerExited: the server died (or another error that `check()` raised).
            ConnectError: the server's TLS certificate failed verification (``verify=`` says how to trust it).
            ReadinessTimeout: no healthy answer within ``timeout`` seconds.
        """
        self._poll_health(base_url, timeout, self.verify)

    def _poll_health(self, base_url: str, timeout: float | None, verify: VerifyTypes) -> None:
        """``wait_until_ready`` with the certificate check ``verify`` (a client's ``verify=``, passed along)."""
        timeout = check_timeout("ready_timeout", timeout)
        endpoints = parse_base_url(base_url)
        import httpx  # lazily: importing the client does not need it

        deadline = Deadline(timeout)
        delays = backoff()
        last = _NO_ANSWER
        options = ClientOptions(verify=verify)
        with http_client(endpoints, options) as http:
            for attempt in itertools.count():
                if self._stopped:  # stop() ran meanwhile (another server of a pool failed, Ctrl-C): end now
                    raise ProviderError(f"{self!r} was stopped before it became ready")
                if attempt % 4 == 0:  # is it still alive? (a Docker inspect; not on every poll)
                    self.check()
                poll = deadline.cap(_POLL_TIMEOUT) or 0.01
                try:
                    response = http.get(endpoints.http("/health"), timeout=poll)
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}"
                except httpx.HTTPError as exc:
                    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
                        raise http_error(exc, base_url, options) from None  # waiting cannot fix it: say verify=
                    if not (isinstance(exc, httpx.TimeoutException) and poll < _POLL_TIMEOUT and last != _NO_ANSWER):
                        last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    # else: the deadline cut this poll short (the last one often gets milliseconds): its
                    # timeout says nothing about the server, the answer before it does
                if deadline.expired:
                    self.check()
                    raise ReadinessTimeout(
                        f"{redact_url(base_url)} did not become healthy within {timeout} s (last: {last})",
                        self.logs(),
                    )
                sleep(deadline.cap(next(delays)))


class DockerProvider(ServerProvider):
    """Runs an environment image in a local Docker engine (docker-py).

    The container port is published on ``host`` (127.0.0.1 by default) with a
    port Docker picks, unless ``port`` asks for one.  Every container is named
    and labelled (``org.openenv.managed=1``), so ``python -m openenv prune``
    can find strays; ``stop`` removes it with force.  A container never
    stopped is removed when the interpreter exits, and by a watcher process
    (the reaper) if the program is killed.  While it holds a container, the
    program also holds a lifeline to a small watchdog container run from the
    same image (when it has ``python3``), which removes the containers when
    the whole job is killed, reaper included (`openenv._blocking.watchdog`;
    ``OPENENV_WATCHDOG=0`` turns it off).

    Args:
        image: the image reference.
        env_vars: environment variables for the container.
        run_options: extra keyword arguments of docker-py's ``containers.create``
            (``mem_limit``, ``nano_cpus``, ``network``, ``volumes``, ``command``, ...).
        port: a fixed host port (default: Docker picks a free one).
        host: the host address to publish on; ``"0.0.0.0"`` exposes it on every interface.
        container_port: the port the server listens on inside the container.
        pull: ``None`` pulls only when the image is missing, ``True`` always, ``False`` never.
        progress: called with each pull progress line (default: printed to a
            terminal's stderr, silent otherwise).
        docker_timeout: seconds for each Docker API request.
    """

    def __init__(
        self,
        image: str,
        *,
        env_vars: Mapping[str, str] | None = None,
        run_options: Mapping[str, Any] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        container_port: int = 8000,
        pull: bool | None = None,
        progress: Callable[[str], None] | None = None,
        docker_timeout: float | None = 60.0,
    ) -> None:
        self.image: str = image
        self.env_vars: dict[str, str] = dict(env_vars or {})
        self.run_options: dict[str, Any] = dict(run_options or {})
        if port is not None:
            self.run_options["ports"] = {f"{container_port}/tcp": (host, port)}
        self.host: str = host
        self.container_port: int = container_port
        self.pull: bool | None = pull
        self.progress: Callable[[str], None] | None = progress if progress is not None else _terminal_progress()
        self.docker_timeout: float | None = docker_timeout
        self.session_id: str = new_session_id()
        self.name: str = new_container_name(image)
        self.container_id: str | None = None
        self._client: Any = None
        self._lock = threading.Lock()
        self._stopped = False
        self._lease: _lifetimes.Lease | None = None

    def __repr__(self) -> str:
        return f"<DockerProvider {self.image} name={self.name}>"

    def start(self) -> str:
        """Pull the image if needed, start the container, and return its URL."""
        run_blocking(self._connect)
        client = self._client
        if client is None:
            raise ProviderError(f"{self!r} was stopped while it started")
        if self.pull:
            run_blocking(_docker.pull_image, client, self.image, progress=self.progress)
        elif self.pull is None:  # pulled once even when many providers of the image start at once
            run_blocking(_docker.pull_if_missing, client, self.image, progress=self.progress)
        info = run_blocking(self._start_container)
        return info.base_url

    def _connect(self) -> None:
        # in the worker thread: a cancelled caller still leaves the client where stop() finds it
        client = _docker.connect_client(self.docker_timeout)
        with self._lock:
            if not self._stopped:
                self._client = client
                return
        client.close()
        raise ProviderError(f"{self!r} was stopped while it started")

    def _start_container(self) -> _docker.ContainerInfo:
        # first the watchdog (outside this job): a job-wide kill from here on still removes the container
        # (released in _halt, which stop() and every failed start run, whether or not it was acquired)
        _watchdog.acquire(self, self.image, self.docker_timeout)
        with self._lock:
            client = self._client
            if client is None:
                _watchdog.release(self)
                raise ProviderError(f"{self!r} was stopped while it started")
            # registered by its unique name before it exists: no window where a kill leaks it
            self._lease = _lifetimes.lease_container(self.name, self.session_id, self._halt, image=self.image)
        info = _docker.start_container(
            client,
            self.image,
            name=self.name,
            labels=container_labels(self.session_id),
            environment=self.env_vars,
            host=self.host,
            container_port=self.container_port,
            run_options=self.run_options,
        )
        with self._lock:
            self.container_id = info.id
            stopped = self._stopped
        if stopped:  # stop() ran while this step was still running in a worker thread
            _docker.remove_container(client, info.id)
            raise ProviderError(f"container {self.name} was stopped while it started")
        return info

    def check(self) -> None:
        """Raise [`ContainerExited`][openenv.sync.ContainerExited] (exit code and logs) if the container stopped."""
        client = self._client
        if self.container_id is None or client is None:  # not started yet, or stopped
            return
        status, code = run_blocking(_docker.container_status, client, self.container_id)
        if status not in ("running", "created", "restarting"):
            logs = self.logs()
            raise ContainerExited(self.name, code, logs, status=status)

    def logs(self) -> str:
        """The container's last log lines."""
        client = self._client
        if self.container_id is None or client is None:
            return ""
        try:
            return run_blocking(_docker.container_logs_tail, client, self.container_id, 20)
        except ProviderError:
            return ""

    def stop(self) -> None:
        """Remove the container (forced) and close the Docker client; idempotent."""
        run_cleanup(self._halt)

    def _halt(self) -> None:
        # blocking, loop-free: also what runs at interpreter exit for a client never closed
        with self._lock:
            self._stopped = True
            client, self._client = self._client, None
            lease, self._lease = self._lease, None
        try:
            if client is not None:
                try:
                    _docker.remove_container(client, self.container_id or self.name)
                finally:
                    client.close()
        finally:
            if lease is not None:
                lease.release()
            _watchdog.release(self)


class ProcessProvider(ServerProvider):
    """Runs an environment server as a child process on a loopback port (no Docker).

    Args:
        command: the command.  In its items, ``{fd}`` is replaced with the file
            descriptor of a listening socket bound here (on ``host`` and
            ``port``, or a port the kernel picks) and handed to the process,
            such as ``uvicorn --fd {fd}``: no other program can take the port
            in between.  ``{port}`` is replaced with the port, and ``{host}``
            with ``host``; without ``{fd}``, the port is one that was free a
            moment before the start, picked below the kernel's ephemeral range
            (no other program's "any port" bind takes it; one that binds that
            very port still could).
        cwd: its working directory.
        env: extra environment variables.
        host: the address the server binds (127.0.0.1).
        port: the port (default: a free one).

    The process runs in its own session and process group; ``stop`` ends the
    whole group.  Its output goes to a temporary file whose tail is attached to
    errors.  A process never stopped is ended when the interpreter exits, and by
    a watcher process (the reaper) if the program is killed; while it runs, it
    is listed in a registry that ``python -m openenv prune`` reads.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        if isinstance(command, str) or not command:
            raise TypeError("command must be a non-empty list of arguments")
        self.command: list[str] = list(command)
        self.cwd = cwd
        self.env: dict[str, str] = dict(env or {})
        self.host = host
        self.port = port
        self._child: _process.ChildProcess | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._lease: _lifetimes.Lease | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.command[0]!r} port={self.port}>"

    @property
    def pid(self) -> int | None:
        """The server process's PID from ``start`` until ``stop``; ``None`` before and after.

        The process leads its own process group (``stop`` ends the group), so
        ``os.killpg(provider.pid, signal.SIGTERM)`` reaches what it started too.
        """
        child = self._child
        return child.pid if child is not None else None

    @classmethod
    def for_environment(cls, factory: str, *, max_sessions: int = 1, **kwargs: Any) -> ProcessProvider:
        """A provider serving ``module:Factory`` in a ``python -m openenv serve`` child process.

        The server is handed its listening socket (``serve --fd {fd}``), bound
        here on ``host`` and ``port`` (default: a free port): no other program
        can take the port between the start and the server's first accept.

        Args:
            factory: ``module:Factory``, an [`Environment`][openenv.server.Environment] subclass or factory.
            max_sessions: the server's session limit.
            **kwargs: the other parameters of ``ProcessProvider``.

        Returns:
            The provider (not started).
        """
        command = [sys.executable, "-m", "openenv", "serve", factory, "--fd", "{fd}"]
        return cls([*command, "--max-sessions", str(max_sessions)], **kwargs)

    def start(self) -> str:
        """Start the process and return its URL."""
        # to its end even when the caller is cancelled: the process it starts is then where stop() finds it
        run_settled(self._spawn)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _spawn(self) -> None:
        # in the worker thread: a cancelled caller still leaves the process where stop() finds it
        listener = None
        try:
            if any("{fd}" in part for part in self.command):
                listener = _process.bind_listener(self.host, self.port)
                port = int(listener.getsockname()[1])
            else:
                port = self.port if self.port is not None else _process.free_port(self.host)
            self.port = port
            command = [part.replace("{host}", self.host).replace("{port}", str(port)) for part in self.command]
            # {fd} is filled in by start_process; the child holds this program's lifeline from its fork on
            fd = listener.fileno() if listener is not None else None
            child = _process.start_process(command, cwd=self.cwd, env=self.env, listener=fd)
        finally:
            if listener is not None:  # the server holds its own copy now
                listener.close()
        with self._lock:
            if not self._stopped:
                self._child = child
                self._lease = _lifetimes.lease_process(child.pid, child.command, self._halt)
                return
        _process.stop_process(child)
        raise ProviderError(f"{self!r} was stopped while it started")

    def check(self) -> None:
        """Raise [`ProviderError`][openenv.sync.ProviderError] with the output tail if the process exited."""
        child = self._child
        if child is not None and child.exit_code() is not None:
            tail = _process.output_tail(child)
            raised = exception_line(tail)
            raise ProviderError(
                f"the server process {os.path.basename(child.command[0])!r} exited with code "
                f"{child.exit_code()}"
                + (f": it raised {raised}" if raised else "")
                + (f"; last output lines:\n{tail}" if tail else "")
            )

    def logs(self) -> str:
        """The process's last output lines."""
        return _process.output_tail(self._child) if self._child is not None else ""

    def stop(self) -> None:
        """Stop the process group; idempotent."""
        run_cleanup(self._halt)

    def _halt(self) -> None:
        # blocking, loop-free: also what runs at interpreter exit for a client never closed
        with self._lock:
            self._stopped = True
            child, self._child = self._child, None
            lease, self._lease = self._lease, None
        try:
            if child is not None:
                _process.stop_process(child)
        finally:
            if lease is not None:
                lease.release()


class CheckoutProvider(ProcessProvider):
    """Runs a local OpenEnv environment checkout's server (what ``Env.from_env(directory)`` uses).

    It runs the checkout's own code (its ``server/app.py`` and whatever that
    imports), in a child process.  The server is ``<python> -m uvicorn <app>
    --fd {fd}``, ``app`` from the checkout's ``openenv.yaml`` (default
    ``server.app:app``), and ``<python>`` chosen when it starts, in this
    order: the checkout's ``.venv/bin/python``; with ``install=True`` and no
    ``.venv``, one created and filled with ``pip install -e <checkout>
    uvicorn`` (which runs the checkout's build backend); ``uv run --project
    <checkout> python`` when ``uv`` is on ``PATH`` (uv creates and syncs the
    checkout's ``.venv`` itself); the current interpreter when it can import
    ``uvicorn`` and the app (tried in a subprocess with the server's
    environment, ``env`` included).  Otherwise starting raises
    [`CheckoutNotRunnable`][openenv.sync.CheckoutNotRunnable], which names each remedy.

    When the declared app cannot be imported under its own name because its
    module imports relative to the package root (``from ..models import
    ...`` in ``server/app.py``, as OpenEnv's chess, wildfire and grid_world
    do) or imports the package by name (coding), the server runs
    ``<package>.server.app:app``, as those environments' Dockerfiles do: the
    package from ``pyproject.toml`` (``[tool.setuptools] package-dir`` or
    ``packages``) or the directory's name, importable from the checkout's
    parent directory (through a symbolic link when the directory has another
    name).  ``served_app`` and the repr say which
    app runs, and the logger ``openenv.checkout`` says why.

    Args:
        directory: the checkout.
        app: its ASGI app as ``module:attribute``.
        command: a command to run instead (``{fd}``, ``{port}`` and ``{host}``
            are filled in as for [`ProcessProvider`][openenv.sync.ProcessProvider]).
        env: extra environment variables (``PYTHONPATH`` is the checkout by default).
        host: the address the server binds (127.0.0.1).
        port: the port (default: a free one).
        install: create and fill the checkout's ``.venv`` when it has none.

    Attributes:
        served_app: the app the server runs (``None`` until started, and with ``command``).
    """

    def __init__(
        self,
        directory: str,
        *,
        app: str = "server.app:app",
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        install: bool = False,
    ) -> None:
        environment = {"PYTHONPATH": directory, **(env or {})}
        chosen = command if command is not None else ["python"]  # replaced in start()
        super().__init__(chosen, cwd=directory, env=environment, host=host, port=port)
        self.directory = directory
        self.app = app
        self.install = install
        self.served_app: str | None = None
        self._given_env: dict[str, str] = dict(env or {})
        self._choose = command is None

    def __repr__(self) -> str:
        served = f" app={self.served_app!r}" if self.served_app is not None else ""
        return f"<CheckoutProvider {self.directory!r}{served} port={self.port}>"

    def start(self) -> str:
        """Choose the interpreter and the app (see the class), start the server, and return its URL.

        Raises:
            CheckoutNotRunnable: no interpreter can run the checkout.
            ProviderError: ``install=True`` failed, or the server could not start.
        """
        if self._choose:
            launch = run_blocking(
                _checkout.prepare, self.directory, self.app, install=self.install, env=self._given_env
            )
            self.command = uvicorn_command(launch.plan, launch.choice.app)
            self.env["PYTHONPATH"] = launch.pythonpath
            self.served_app = launch.choice.app
            self._choose = False
        return super().start()


def _terminal_progress() -> Callable[[str], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return show
