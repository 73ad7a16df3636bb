# GENERATED from src/openenv/_async/foreign.py by scripts/run_unasync.py -- DO NOT EDIT.
"""OpenEnv's provider objects, accepted unchanged (``LocalDockerProvider``, ``UVProvider``, cloud sandboxes, ...).

OpenEnv has two provider shapes, told apart by their methods (nothing of
OpenEnv is imported here):

* a ``ContainerProvider``: ``start_container(image, port=None, env_vars=None)``
  returns a base URL, ``wait_for_ready(base_url, timeout_s)``, ``stop_container()``;
* a ``RuntimeProvider``: ``start(port=None, env_vars=None)`` returns a base
  URL, ``wait_for_ready(timeout_s)``, ``stop()``.

`adopt_provider` turns any of them into one of ours.  OpenEnv's local
providers are translated to ours, with their own settings
(``LocalDockerProvider`` -> [`DockerProvider`][openenv.sync.DockerProvider],
``UVProvider`` -> a checkout's server process); ``DockerSwarmProvider`` is
refused; any other one (Daytona, Modal, a team's own) is wrapped in
[`OpenEnvProvider`][openenv.sync.OpenEnvProvider].
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from .._blocking import external as _external
from .._core.errors import CheckoutNotRunnable, ProviderError, ReadinessTimeout
from .._core.options import check_timeout
from .._core.targets import Target
from .._core.urls import hide_url, parse_base_url, scrub, unhide_url, url_secrets
from .._shim_sync import run_blocking, run_cleanup
from .providers import DockerProvider, Provider
from .resolve import checkout_provider

__all__ = ["OpenEnvProvider", "adopt_provider", "adopt_factory", "provider_kind", "provider_image"]

CONTAINER_METHODS = ("start_container", "wait_for_ready", "stop_container")
RUNTIME_METHODS = ("start", "wait_for_ready", "stop")
OUR_METHODS = ("start", "wait_until_ready", "stop")

#: the readiness budget given to a provider's own ``wait_for_ready`` when the caller set no limit
#: (OpenEnv's providers need a finite ``timeout_s``; their waits cannot be cancelled)
UNBOUNDED_READY = 600.0

_SHAPES = (
    "an OpenEnv ContainerProvider (start_container, wait_for_ready(base_url, timeout_s), stop_container), "
    "an OpenEnv RuntimeProvider (start, wait_for_ready(timeout_s), stop), "
    "or an openenv provider (start, wait_until_ready(base_url, timeout), stop: openenv.sync.Provider)"
)

_gates: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_gates_lock = threading.Lock()


def _has(obj: object, names: tuple[str, ...]) -> list[str]:
    """The names of ``names`` that ``obj`` has no callable for."""
    return [name for name in names if not callable(getattr(obj, name, None))]


def _class_path(obj: object) -> tuple[str, str]:
    cls = type(obj)
    return cls.__module__, cls.__qualname__


def provider_kind(obj: object) -> str:
    """``"ours"``, ``"container"`` or ``"runtime"``: the shape ``obj`` has (checked in this order).

    Raises:
        TypeError: none of the three; the message names the missing methods.
    """
    if not _has(obj, OUR_METHODS):
        return "ours"
    if not _has(obj, CONTAINER_METHODS):
        return "container"
    if not _has(obj, RUNTIME_METHODS):
        return "runtime"
    shapes = {"ContainerProvider": CONTAINER_METHODS, "RuntimeProvider": RUNTIME_METHODS, "openenv": OUR_METHODS}
    closest = min(shapes, key=lambda shape: len(_has(obj, shapes[shape])))
    missing = ", ".join(_has(obj, shapes[closest]))
    raise TypeError(
        f"{type(obj).__name__} is not a provider: it must be {_SHAPES}; "
        f"as the nearest, an OpenEnv {closest} shape, it lacks {missing}"
        if closest != "openenv"
        else f"{type(obj).__name__} is not a provider: it must be {_SHAPES}; it lacks {missing}"
    )


def adopt_provider(
    provider: Any,
    *,
    image: str | None = None,
    env_vars: Mapping[str, str] | None = None,
    port: int | None = None,
    run_options: Mapping[str, Any] | None = None,
    pull: bool | None = None,
) -> Provider:
    """One of our providers for ``provider``: ours unchanged, OpenEnv's translated or wrapped.

    * an openenv provider (``start``, ``wait_until_ready``, ``stop``): returned as it is;
    * OpenEnv's ``LocalDockerProvider`` (exactly that class, from a module
      ``openenv.*``): a [`DockerProvider`][openenv.sync.DockerProvider] of ``image``
      (127.0.0.1, labels, unique names, reaper, ``prune``);
    * OpenEnv's ``UVProvider`` with a local ``project_path`` laid out as an OpenEnv
      environment: the project's server as a process in its directory on a socket
      bound here (a ``CheckoutProvider`` with its ``app`` and ``env_vars``); a ``git+``
      project, or another layout, is wrapped as below;
    * OpenEnv's ``DockerSwarmProvider``: refused (see the providers guide);
    * any other ContainerProvider or RuntimeProvider: an [`OpenEnvProvider`][openenv.sync.OpenEnvProvider].

    Args:
        provider: the provider object, unchanged.
        image: the image a ContainerProvider starts (``start_container(image)``).
        env_vars: environment variables for the server.
        port: a fixed port, passed to the provider.
        run_options: for a translated ``LocalDockerProvider``: docker-py ``containers.create`` options.
        pull: for a translated ``LocalDockerProvider``: as for ``DockerProvider``.

    Raises:
        TypeError: ``provider`` has none of the accepted shapes (the message
            names the missing methods), or a ContainerProvider came without an image.
        ProviderError: a ``DockerSwarmProvider``.
    """
    if isinstance(provider, OpenEnvProvider):
        module, name = _class_path(provider.provider)
        unused = not (provider._starting or provider._started) and provider._gate is None  # (a start cap: kept)
        if name == "LocalDockerProvider" and module.split(".")[0] == "openenv" and provider.image and unused:
            # OpenEnv's own Docker provider, wrapped as the old advice said: ours starts the same image safely
            # (its containers are named by the millisecond: a pool's collide; published on every interface)
            return DockerProvider(provider.image, env_vars=provider.env_vars, port=provider.port)
        return provider
    kind = provider_kind(provider)
    if kind == "ours":
        return provider  # type: ignore[no-any-return]
    module, name = _class_path(provider)
    if module.split(".")[0] == "openenv":
        if name == "DockerSwarmProvider":
            raise ProviderError(
                "DockerSwarmProvider is not supported: its constructor may have switched this Docker engine into "
                "swarm mode (docker swarm init), its published ports listen on every interface, and its routing "
                "mesh needs IPVS. Pass LocalDockerProvider() (translated to our DockerProvider), or use "
                "EnvPool.from_docker_image(image, size=N) for many servers, or RayProvider for a cluster "
                "(leave the swarm with `docker swarm leave --force` if you did not want it)"
            )
        if name == "LocalDockerProvider":
            if image is None:
                raise TypeError(_needs_image(provider))
            return DockerProvider(image, env_vars=env_vars, port=port, run_options=run_options, pull=pull)
        if name == "UVProvider":
            translated = _uv_provider(provider, env_vars, port)
            if translated is not None:
                return translated
    return OpenEnvProvider(provider, image=image, env_vars=env_vars, port=port)


def adopt_factory(factory: Callable[[int], Any]) -> Callable[[int], Provider]:
    """``factory`` whose providers go through `adopt_provider` (a pool's factory of OpenEnv providers)."""

    def adopted(index: int) -> Provider:
        return adopt_provider(factory(index))

    return adopted


def provider_image(source: str, where: Target | None) -> str:
    """The image ``Env.from_env(source, provider=p)`` gives a ContainerProvider: what ``source`` names, or itself.

    ``where`` is what ``source`` names (`openenv._async.resolve.locate_for_provider`): ``docker:NAME``, a
    Space id (its image) and an environment package's name (its default image) give their image; anything
    else (``None``: a provider's own source, such as ``hf://owner/space``) is passed as it is.
    """
    return where.target if where is not None and where.kind == "image" else source


def _needs_image(provider: object) -> str:
    return (
        f"{type(provider).__name__} is an OpenEnv ContainerProvider: it needs an image to start; "
        "pass it as Env.from_docker_image(image, provider=p) or Env.from_env(image, provider=p), "
        "use EnvPool.from_docker_image(image, size=N) for a pool of them, "
        "or wrap it: Env.from_provider(OpenEnvProvider(p, image=image))"
    )


def _uv_provider(provider: Any, env_vars: Mapping[str, str] | None, port: int | None) -> Provider | None:
    """OpenEnv's ``UVProvider`` as our checkout provider, from its own settings (``None``: a ``git+`` project)."""
    project = getattr(provider, "project_path", None)
    if not isinstance(project, str) or project.startswith("git+"):
        return None  # a git project is cloned by the provider itself: wrapped instead
    app = getattr(provider, "app", None)
    environment = {**(getattr(provider, "env_vars", None) or {}), **(env_vars or {})}
    try:
        translated = checkout_provider(project, None, environment, port)
    except CheckoutNotRunnable:
        return None  # not laid out as an OpenEnv environment: its own code runs it (wrapped)
    if isinstance(app, str) and app and app != "server.app:app":  # given: else the project's openenv.yaml says
        translated.app = app
    return translated


def _plain_loopback(url: str) -> bool:
    """Whether ``url`` is a loopback address with no path or query (nothing secret: a local proxy's port)."""
    try:
        endpoints = parse_base_url(url)
    except Exception:  # noqa: BLE001 - not a URL: keep it hidden
        return False
    rest = endpoints.base_url.split("://", 1)[-1]
    return endpoints.host in ("127.0.0.1", "localhost", "::1", "[::1]") and "/" not in rest and "?" not in rest


class OpenEnvProvider:
    """Any OpenEnv provider (a ContainerProvider or a RuntimeProvider: Daytona, Modal, a team's own), made safe.

    ``Env.from_provider``, ``Env.from_docker_image(image, provider=p)``,
    ``Env.from_env(target, provider=p)``, ``EnvPool.from_provider`` and
    ``environment_factory(..., provider=p)`` wrap such a provider in one of
    these by themselves; build one yourself to give a ContainerProvider its
    image, or to cap concurrent starts.  What it adds to the provider:

    * in ``openenv.aio``, every call of the provider (``start``, its
      ``wait_for_ready``, ``stop``, ``close``) runs in a worker thread: the
      event loop never waits for it;
    * readiness is the provider's own ``wait_for_ready``, with a finite
      ``timeout_s`` (the caller's ``ready_timeout``; with no limit,
      ``UNBOUNDED_READY``, 600 s); its ``TimeoutError`` becomes
      [`ReadinessTimeout`][openenv.sync.ReadinessTimeout], any other error a
      [`ProviderError`][openenv.sync.ProviderError] (the original as ``__cause__``);
    * ``stop()`` is idempotent, is not interrupted by a cancellation, and runs
      ``stop_container()``/``stop()`` and then ``close()`` (when the provider
      has one), each even when another failed; every failure is raised together
      as one ``ProviderError``.  A stop asked for while the start still runs
      (a cancellation, Ctrl-C in another thread, a pool that failed) takes
      effect as soon as the start returns;
    * the server's whole URL is a secret: reprs, logs and errors show
      ``<Class URL hidden>`` instead (a cloud sandbox's URL is often a bearer
      capability); a path prefix of the URL is kept for ``/ws``;
    * a server never stopped is stopped at interpreter exit, and while it runs
      a record lists it in ``python -m openenv prune --dry-run``.  After a
      SIGKILL nothing here can remove a cloud sandbox: it lives until the
      provider's own lifetime ends (Modal: 300 s by default; Novita: 3,600 s;
      Daytona: 15 minutes idle), and ``prune`` lists its record.

    Args:
        provider: the provider object, unchanged.
        image: what a ContainerProvider starts (required for one); ignored by a RuntimeProvider.
        env_vars: passed to ``start_container``/``start`` as ``env_vars``.
        port: passed as ``port``.
        max_concurrent_starts: at most this many providers of the same class
            start at once in this process (a cloud API's rate limit); the
            others wait their turn (``None``: no cap).

    Raises:
        TypeError: ``provider`` is neither shape, or a ContainerProvider came without ``image``.
        ValueError: ``max_concurrent_starts`` is below 1.
    """

    def __init__(
        self,
        provider: Any,
        *,
        image: str | None = None,
        env_vars: Mapping[str, str] | None = None,
        port: int | None = None,
        max_concurrent_starts: int | None = None,
    ) -> None:
        kind = provider_kind(provider)
        if kind == "ours":
            raise TypeError(f"{type(provider).__name__} is already an openenv provider: use it as it is")
        if kind == "container" and image is None:
            raise TypeError(_needs_image(provider))
        if max_concurrent_starts is not None and (
            isinstance(max_concurrent_starts, bool) or not isinstance(max_concurrent_starts, int)
        ):
            raise ValueError(f"max_concurrent_starts must be a positive integer or None, not {max_concurrent_starts!r}")
        if max_concurrent_starts is not None and max_concurrent_starts < 1:
            raise ValueError(f"max_concurrent_starts must be a positive integer or None, not {max_concurrent_starts!r}")
        self.provider: Any = provider
        self.kind: str = kind
        self.image: str | None = image
        self.env_vars: dict[str, str] | None = dict(env_vars) if env_vars is not None else None
        self.port: int | None = port
        module, name = _class_path(provider)
        self._class = f"{module}.{name}"
        self._label = f"<{name} URL hidden>"
        self._gate: threading.BoundedSemaphore | None = None
        if max_concurrent_starts is not None:
            with _gates_lock:
                self._gate = _gates.setdefault(
                    (self._class, max_concurrent_starts), threading.BoundedSemaphore(max_concurrent_starts)
                )
        self._lock = threading.Lock()
        self._starting = False
        self._started = False  # the provider's start was called: its stop must run
        self._stopped = False
        self._url: str | None = None
        self._lease: _external.ExternalLease | None = None

    def __repr__(self) -> str:
        what = f" {self.image}" if self.image else ""
        state = "stopped" if self._stopped else "running" if self._url else "not started"
        return f"<OpenEnvProvider {type(self.provider).__name__}{what} {state}>"

    @property
    def base_url(self) -> str | None:
        """The server's URL once started (a secret: never print it)."""
        return self._url

    # -- start ----------------------------------------------------------------------

    def start(self) -> str:
        """Call the provider's ``start_container``/``start`` (in a worker thread) and return its URL.

        Raises:
            ProviderError: the provider raised (its error is the ``__cause__``),
                returned no URL, or was stopped while it started.
        """
        return run_blocking(self._start)

    def _start(self) -> str:
        with self._lock:
            if self._stopped:
                raise ProviderError(f"{self!r} was stopped before it started")
            if self._starting or self._started:
                raise ProviderError(f"{self!r} was already started: a provider object serves one server")
            self._starting = True
        gate = self._gate
        if gate is not None:
            gate.acquire()
        try:
            try:
                url = self._call_start()
            finally:
                with self._lock:
                    self._starting = False
                    self._started = True
                    stopped = self._stopped
            if not isinstance(url, str) or not url:
                raise ProviderError(f"{type(self.provider).__name__} returned {type(url).__name__}, not a base URL")
            hide_url(url, self._label)
            parse_base_url(url)  # an invalid URL: an error now, with the provider stopped below
        except BaseException as exc:
            self._after_failed_start(exc)
            raise
        finally:
            if gate is not None:
                gate.release()
        if stopped:  # stop() ran while the provider was starting: it cleans up now
            message = f"{self!r} was stopped while it started (the server was stopped again)"
            try:
                self._halt()
            except ProviderError as exc:
                raise ProviderError(message) from exc
            raise ProviderError(message)
        with self._lock:
            self._url = url
            self._lease = _external.lease_external(self._class, self.image or type(self.provider).__name__, self._halt)
        return url

    def _call_start(self) -> Any:
        kwargs: dict[str, Any] = {}
        if self.port is not None:
            kwargs["port"] = self.port
        if self.env_vars is not None:
            kwargs["env_vars"] = self.env_vars
        name = type(self.provider).__name__
        try:
            if self.kind == "container":
                return self.provider.start_container(self.image, **kwargs)
            return self.provider.start(**kwargs)
        except TypeError as exc:
            method = (
                "start_container(image, port=None, env_vars=None)"
                if self.kind == "container"
                else "start(port=None, env_vars=None)"
            )
            raise ProviderError(
                f"{name}.{method.partition('(')[0]} could not be called as OpenEnv's {method}: {exc}; "
                "wrap a provider whose start needs other arguments in your own openenv provider "
                "(start, wait_until_ready, stop: openenv.sync.Provider)"
            ) from exc
        except Exception as exc:
            raise ProviderError(f"{name} failed to start: {type(exc).__name__}: {exc}") from exc

    def _after_failed_start(self, exc: BaseException) -> None:
        """The start failed or was interrupted: the provider may hold half a server, so its stop runs."""
        try:
            self._halt()
        except ProviderError as stop_error:
            exc.__context__ = stop_error  # shown with the start's error, never instead of it

    # -- readiness --------------------------------------------------------------------

    def wait_until_ready(self, base_url: str, timeout: float | None) -> None:
        """The provider's own ``wait_for_ready`` (in a worker thread), with a finite deadline.

        Raises:
            ReadinessTimeout: it raised ``TimeoutError``.
            ProviderError: it raised anything else (the original is the ``__cause__``),
                or the provider was stopped meanwhile.
        """
        run_blocking(self._wait, base_url, timeout)

    def _wait(self, base_url: str, timeout: float | None) -> None:
        limit = check_timeout("ready_timeout", timeout)
        budget = UNBOUNDED_READY if limit is None else limit
        name = type(self.provider).__name__
        try:
            if self.kind == "container":
                self.provider.wait_for_ready(base_url, timeout_s=budget)
            else:
                self.provider.wait_for_ready(timeout_s=budget)
        except TimeoutError as exc:
            raise ReadinessTimeout(f"{name}: the server was not ready within {budget} s ({self._scrub(exc)})") from exc
        except Exception as exc:
            raise ProviderError(f"{name}.wait_for_ready failed: {type(exc).__name__}: {self._scrub(exc)}") from exc
        if self._stopped:
            raise ProviderError(f"{self!r} was stopped before it became ready")

    def _scrub(self, exc: BaseException, url: str | None = None) -> str:
        """``exc``'s message with the server's URL replaced by its label, and its parts hidden.

        An HTTP library's error names the parts apart (``host='abc.sandbox.example'``,
        ``url: /capability/health``): a non-loopback host, the path and any
        password or query value are each hidden too.
        """
        text = str(exc)
        url = url or self._url
        if url:
            text = text.replace(url.rstrip("/"), self._label)
            try:
                parts = urlsplit(url)
                host = parts.hostname or ""
            except ValueError:
                return text
            secrets = url_secrets(url)
            if host and host not in ("127.0.0.1", "localhost", "::1"):
                secrets.append(host)
            if parts.path.strip("/"):
                secrets.append(parts.path.rstrip("/"))
            text = scrub(text, secrets)
        return text

    # -- stop -------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the server (``stop_container``/``stop``, then ``close``); idempotent, not cancellable.

        Raises:
            ProviderError: one or more of those calls failed (each was made);
                ``errors`` holds them, the first is the ``__cause__``.
        """
        run_cleanup(self._halt)

    def _halt(self) -> None:
        with self._lock:
            self._stopped = True
            if self._starting:
                return  # the start is still running: it stops the server as soon as it returns
            if not self._started:
                return
            self._started = False
            url, self._url = self._url, None
            lease, self._lease = self._lease, None
        name = type(self.provider).__name__
        errors: list[BaseException] = []
        stop = self.provider.stop_container if self.kind == "container" else self.provider.stop
        for call in (stop, getattr(self.provider, "close", None)):
            if not callable(call):
                continue
            try:
                call()
            except Exception as exc:  # noqa: BLE001 - every cleanup step runs; all failures are raised below
                errors.append(exc)
        if lease is not None:
            lease.release()
        if url is not None and _plain_loopback(url):
            unhide_url(url)  # no capability in it, and its port will serve others; any other URL stays hidden
        if errors:
            listed = "; ".join(f"{type(e).__name__}: {self._scrub(e, url)}" for e in errors)
            error = ProviderError(f"stopping {name} failed ({len(errors)} error(s)): {listed}")
            error.errors = errors  # type: ignore[attr-defined]
            raise error from errors[0]
