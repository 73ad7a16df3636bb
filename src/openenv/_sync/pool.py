# GENERATED from src/openenv/_async/pool.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``EnvPool``: many sessions stepped together (an RL trainer's batch of environments).

The IO half of the pool: it moves frames on each session's own [`Env`][openenv.sync.Env]
through the connection room's ``Seam`` (``_send`` / ``_receive`` / ``_abandon``)
and keeps only a map of tickets (session index -> request in flight);
``_core/pool.py`` decides what each session is sent, applies the concurrency
limit, keeps the books and the send times, and decides capacity waits and
replacements (with their messages).  It reads the clock and passes it in.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic

from typing_extensions import Self, TypeVar, Unpack

from .._blocking.retry import Deadline
from .._blocking.sources import hosted_headers
from .._core.codec import Codec, as_codec
from .._core.errors import OpenEnvError
from .._core.guard import InFlight
from .._core.options import READY_TIMEOUT, check_options, check_timeout
from .._core.pool import (
    POOL_OPTION_NAMES,
    Completed,
    Job,
    JobKind,
    PoolArgs,
    PoolCall,
    PoolCore,
    PoolLife,
    PoolMetrics,
    PoolOptions,
    check_size,
    session_urls,
)
from .._core.result import StepResult
from .._core.servers import check_max_servers
from .env import Env
from .foreign import adopt_factory
from .pool_checkout import PoolCheckout
from .pool_flight import PoolFlight
from .pool_open import PoolOpening
from .pool_servers import close_all, first_servers, stop_all, unique
from .pool_sessions import PoolSessions
from .providers import DockerProvider, Provider
from .resolve import checkout_provider, locate, schema_codec

__all__ = ["EnvPool"]

ActT = TypeVar("ActT", default=dict[str, Any])
ObsT = TypeVar("ObsT", default=dict[str, Any])
StateT = TypeVar("StateT", default=dict[str, Any])


class EnvPool(Generic[ActT, ObsT, StateT]):
    """A pool of environment sessions, stepped together: one [`Env`][openenv.sync.Env] per session.

    ``EnvPool(url, size=8)`` opens 8 sessions on one server;
    ``EnvPool([url_a, url_b])`` one session per URL;
    [`from_provider()`][openenv.sync.EnvPool.from_provider],
    [`from_docker_image()`][openenv.sync.EnvPool.from_docker_image] and
    [`from_env()`][openenv.sync.EnvPool.from_env] start one server per session
    (in parallel) and stop them on close.  The context manager (or
    [`connect()`][openenv.sync.EnvPool.connect]) opens every session concurrently,
    with 64 handshakes under way at most (each one's ``connect_timeout`` runs from
    its own start).

    **Send, then receive.** [`step()`][openenv.sync.EnvPool.step] and
    [`reset()`][openenv.sync.EnvPool.reset] send every session's request first, then
    read the replies (in order; with requests queued by ``max_concurrency``,
    whichever is in first), so the sessions advance concurrently on their
    servers.  It takes no thread and no task per session: the blocking flavour
    uses only websockets' own reader threads, the event-loop flavour runs on the
    caller's task.  [`send()`][openenv.sync.EnvPool.send] only sends;
    [`recv()`][openenv.sync.EnvPool.recv] returns the first replies to arrive.

    **Autoreset** (``autoreset=True``, Gymnasium's next-step mode): once a
    step returned ``done``, that session's next ``step`` sends a ``reset`` (with
    no arguments) instead; the action given for it is ignored and its slot in the
    returned list is the reset's result (``done`` false, the new episode's first
    observation).  With ``autoreset=False`` (default) a finished session is
    stepped like any other (the environment decides what that means).

    **Failure isolation.** A session that fails (its connection lost, no reply
    within ``message_timeout`` of its send, a server error, a reply that breaks the protocol)
    is reported for its index while the other sessions' results still come back.
    With ``on_failure="raise"`` (default), ``step``/``reset`` raise
    [`PoolError`][openenv.sync.PoolError] holding every result (``None`` at the failed
    indices) and every error; a failed session stays failed (its later steps
    fail at once, sending nothing) until ``reset(ids=[i])`` or ``replace(i)``.
    With ``on_failure="replace"`` the pool replaces a failed session at once
    (a new connection, a new server when the pool started them; up to
    ``replace_attempts`` tries with backoff; a failed reset's seed and keywords
    are kept), and its slot holds the new episode's reset result (a reset that a
    full server still refused when ``capacity_timeout`` ran out is reported
    instead, unless the pool started a server for that session alone);
    [`last_errors`][openenv.sync.EnvPool.last_errors] (and
    [`Completed.error`][openenv.sync.Completed]) say what happened.  If a replacement
    fails too, ``step``/``reset`` raise one ``PoolError`` whose ``results`` still
    hold the other sessions' results.  An action the codec refuses raises
    [`InvalidAction`][openenv.sync.InvalidAction] before anything is sent.

    **Capacity.** Opening a session (connect, replace, resize) and the first
    reset of a fresh session wait with backoff while the server answers
    ``CAPACITY_REACHED``, up to ``capacity_timeout`` seconds (the sessions of one
    call wait together, within one ``capacity_timeout``).

    **Concurrency.** ``max_concurrency`` caps the requests in flight at once;
    the others are queued and sent as replies come in
    ([`metrics`][openenv.sync.EnvPool.metrics] counts both).  The pool carries one call
    at a time: a concurrent ``step``/``reset``/``recv`` (another thread or task) raises
    [`SessionBusy`][openenv.sync.SessionBusy], and so do ``step``/``reset`` while
    ``send`` replies are outstanding.

    Args:
        base_url: one server (with ``size`` sessions on it) or a list of
            servers (one session each).
        size: the number of sessions on a single ``base_url`` (default 1); with
            a list, ``None`` or its length.
        codec: as for ``Env(...)``; one codec shared by every session.
        pool_options: the pool's options as one [`PoolOptions`][openenv.sync.PoolOptions]
            (or give them as keyword arguments; not both).
        **options: the pool's options (``autoreset``, ``on_failure``,
            ``replace_attempts``, ``max_concurrency``, ``capacity_timeout``:
            see [`PoolOptions`][openenv.sync.PoolOptions]) and the connection
            options of ``Env(...)``, for every session.

    Raises:
        ValueError: ``size`` does not fit ``base_url``, or another argument is out of range.
        InvalidOption: a connection option is out of range.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        size: int | None = None,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | None = None,
        pool_options: PoolOptions | None = None,
        **options: Unpack[PoolArgs],
    ) -> None:
        urls = session_urls(base_url, size)
        settings, env_options = PoolOptions.split(options, pool_options)
        self._pool_options = settings
        self._core = PoolCore(
            len(urls),
            autoreset=settings.autoreset,
            max_concurrency=settings.max_concurrency,
            on_failure=settings.on_failure,
            message_timeout=check_options(env_options, type(self).__name__, POOL_OPTION_NAMES).message_timeout,
        )
        #: makes taking sessions atomic: ``checkout()`` may run on any thread, beside a pool call
        self._lock = threading.Lock()
        self._guard = InFlight()
        self._life = PoolLife()
        self._last_errors: dict[int, OpenEnvError] = {}
        # one object per concern: what each session is, the requests in flight, opening and replacing
        self._sessions: PoolSessions[ActT, ObsT, StateT] = PoolSessions(urls, as_codec(codec), env_options)
        self._flight = PoolFlight(self._sessions, self._core)
        self._opening = PoolOpening(self._sessions, self._core, self._flight, settings, self._lock, self._life)

    # -- constructors that start servers -------------------------------------------

    @classmethod
    def from_provider(
        cls,
        factory: Callable[[int], Provider | Any],
        *,
        size: int,
        max_servers: int | None = None,
        ready_timeout: float | None = READY_TIMEOUT,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | str | None = None,
        pool_options: PoolOptions | None = None,
        **options: Unpack[PoolArgs],
    ) -> Self:
        """Start one server per session (up to ``max_servers``) and return the pool with every session open.

        ``factory(i)`` makes the provider of server ``i``, which is session
        ``i``'s (it is called again for ``replace(i)`` and for new servers of
        ``resize``).  The servers start in parallel (every one starts before any
        is waited on); closing the pool stops them.  On any failure every server
        started is stopped before the error propagates.

        One server per session works with any server, including the many that
        hold one session (OpenEnv's default ``max_concurrent_envs``).  With
        ``max_servers`` below ``size``, that many servers start and the
        sessions share them round-robin (session ``i`` on server ``i %
        max_servers``), so each server must hold ``ceil(size / max_servers)``
        sessions; a server that refuses one says how many it holds
        (``CAPACITY_REACHED``), and the pool then raises at once, naming the
        ``max_servers`` it needs, instead of waiting ``capacity_timeout``.

        Args:
            factory: returns the (not yet started) provider for an index: one
                of ours, or an OpenEnv provider object (a ``RuntimeProvider``, or a
                ``ContainerProvider`` wrapped with its image in
                [`OpenEnvProvider`][openenv.sync.OpenEnvProvider]), as for
                [`Env.from_provider()`][openenv.sync.Env.from_provider].
            size: the number of sessions.
            max_servers: the most servers to start (default ``None``: one per session).
            ready_timeout: seconds for each server to answer ``GET /health``.
            codec: as for ``EnvPool(...)``, or ``"schema"`` (built from the
                first server's ``GET /schema``).
            pool_options: as for ``EnvPool(...)``.
            **options: as for ``EnvPool(...)``: the pool's options and the connection options of ``Env(...)``.

        Returns:
            The pool, its sessions open.

        Raises:
            ValueError: ``size`` is not a positive integer, or another argument is out of range.
            BootstrapError: the factory or a server failed; every server was
                stopped, and ``failures`` holds each failed session index's error.
            PoolError: a session could not be opened (``errors`` by index); every server was stopped.
            CapacityReached: a server stayed full for ``capacity_timeout``
                seconds, or holds fewer sessions than ``max_servers`` puts on
                it; every server was stopped.
            InvalidOption: an option or ``ready_timeout`` is out of range.
        """
        check_size(size)
        cap = check_max_servers(max_servers)
        ready_timeout = check_timeout("ready_timeout", ready_timeout)
        settings, env_options = PoolOptions.split(options, pool_options)  # before any server starts
        check_options(env_options, f"{cls.__name__}.from_provider", POOL_OPTION_NAMES)
        factory = adopt_factory(factory)  # OpenEnv's providers, translated or wrapped
        started, providers, urls = first_servers(factory, size, cap, ready_timeout, env_options.get("verify"))
        try:
            resolved = schema_codec(codec, urls[0], env_options)
            pool = cls(urls, codec=resolved, pool_options=settings, **env_options)
        except BaseException:
            stop_all(started)
            raise
        sessions = pool._sessions
        sessions.providers, sessions.factory, sessions.max_servers = list(providers), factory, cap
        sessions.ready_timeout = ready_timeout
        return pool._connect_or_close()

    @classmethod
    def from_docker_image(
        cls,
        image: str,
        *,
        size: int,
        max_servers: int | None = None,
        env_vars: Mapping[str, str] | None = None,
        run_options: Mapping[str, Any] | None = None,
        pull: bool | None = None,
        ready_timeout: float | None = READY_TIMEOUT,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | str | None = None,
        pool_options: PoolOptions | None = None,
        **options: Unpack[PoolArgs],
    ) -> Self:
        """Run ``size`` containers of ``image`` (one session each) and return the pool with every session open.

        Each container is a [`DockerProvider`][openenv.sync.DockerProvider] publishing
        port 8000 on a port Docker picks; they start in parallel and are
        removed when the pool closes (or when anything fails on the way).
        With ``max_servers`` below ``size``, that many containers hold the
        sessions (see [`from_provider()`][openenv.sync.EnvPool.from_provider]).

        Args:
            image: the image reference, such as ``"echo-env:latest"``.
            size: the number of sessions (and of containers, up to ``max_servers``).
            max_servers: the most containers (default ``None``: one per session).
            env_vars: environment variables for every container.
            run_options: extra docker-py ``containers.create`` options.
            pull: ``None`` pulls when missing, ``True`` always, ``False`` never.
            ready_timeout: seconds for each server to become healthy.
            codec: as for [`from_provider()`][openenv.sync.EnvPool.from_provider].
            pool_options: as for ``EnvPool(...)``.
            **options: as for ``EnvPool(...)``: the pool's options and the connection options of ``Env(...)``.

        Returns:
            The pool, its sessions open.

        Raises:
            BootstrapError: a container failed to start or become ready;
                every container was removed, and ``failures`` holds each failed
                session index's error (with the container's logs).
        """
        settings, env_options = PoolOptions.split(options, pool_options)  # before any container starts
        check_options(env_options, f"{cls.__name__}.from_docker_image", POOL_OPTION_NAMES)

        def factory(index: int) -> Provider:
            return DockerProvider(image, env_vars=env_vars, run_options=run_options, pull=pull)

        return cls.from_provider(
            factory,
            size=size,
            max_servers=max_servers,
            ready_timeout=ready_timeout,
            codec=codec,
            pool_options=settings,
            **env_options,
        )

    @classmethod
    def from_env(
        cls,
        source: str,
        *,
        size: int,
        max_servers: int | None = None,
        use_docker: bool = True,
        tag: str = "latest",
        registry: str | None = None,
        env_vars: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
        install: bool = False,
        ready_timeout: float | None = READY_TIMEOUT,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | str | None = None,
        pool_options: PoolOptions | None = None,
        **options: Unpack[PoolArgs],
    ) -> Self:
        """A pool for what [`Env.from_env()`][openenv.sync.Env.from_env] takes: a URL, an image, a checkout, a Space id.

        * a URL (a running server, a hosted Space): ``size`` sessions on that
          one server (it must allow that many: ``MAX_CONCURRENT_ENVS``);
          ``$HF_TOKEN`` is sent to ``*.hf.space`` hosts, as ``Env.from_env`` does;
        * a Docker image (``name:tag``, ``docker:NAME``): ``size`` containers of it;
        * a Space id ``owner/name`` with ``use_docker`` (default): ``size``
          containers of the Space's image, started in parallel (without
          ``use_docker``: ``size`` sessions on the hosted Space);
        * a local checkout directory: ``size`` server processes, started in
          parallel (with ``install=True`` the checkout's ``.venv`` is created
          once, for all of them).

        One server per session works with servers that hold one session, as
        most of OpenEnv's do; ``max_servers`` caps the servers (the sessions
        then share them, see [`from_provider()`][openenv.sync.EnvPool.from_provider]).
        Servers started here are stopped when the pool closes.

        Args:
            source: a URL, a Docker image, a local checkout directory, or a
                Space id ``owner/name`` (the rules of ``Env.from_env``).
            size: the number of sessions (and of servers, unless ``source`` is a URL).
            max_servers: the most servers to start (default ``None``: one per
                session; not used for a URL).
            use_docker: run a Space's image (``True``) or use the hosted Space.
            tag: the Space image's tag.
            registry: the registry of Space images.
            env_vars: environment variables for each server.
            command: the server command for a checkout (as for ``Env.from_env``).
            install: create and fill a checkout's ``.venv`` when it has none.
            ready_timeout: seconds for each server to become healthy.
            codec: as for [`from_provider()`][openenv.sync.EnvPool.from_provider].
            pool_options: as for ``EnvPool(...)``.
            **options: as for ``EnvPool(...)``: the pool's options and the connection options of ``Env(...)``.

        Returns:
            The pool, its sessions open.

        Raises:
            InvalidURL: ``source`` names none of those kinds, or is a path to
                a directory that does not exist.
            CheckoutNotRunnable: the directory is not an OpenEnv environment.
            ValueError: ``size`` is below 1.
            BootstrapError: a server failed to start; every server was stopped.
            CapacityReached: a URL's server stayed full for ``capacity_timeout`` seconds.
            PoolError: sessions could not be opened.
        """
        settings, env_options = PoolOptions.split(options, pool_options)  # before any server starts
        check_options(env_options, f"{cls.__name__}.from_env", POOL_OPTION_NAMES)
        # an environment package's name: its own client types the sessions
        where, codec = locate(source, codec, use_docker=use_docker, tag=tag, registry=registry)
        if where.kind == "url":
            check_size(size)
            env_options["headers"] = hosted_headers(where.target, env_options.get("headers"))
            resolved = schema_codec(codec, where.target, env_options)
            pool = cls(where.target, size=size, codec=resolved, pool_options=settings, **env_options)
            return pool._connect_or_close()
        target = where.target
        if where.kind == "image":

            def factory(index: int) -> Provider:
                return DockerProvider(target, env_vars=env_vars)

        else:
            checkout_provider(target, command, env_vars, None, install)  # refuse a non-environment at once

            def factory(index: int) -> Provider:
                return checkout_provider(target, command, env_vars, None, install)

        return cls.from_provider(
            factory,
            size=size,
            max_servers=max_servers,
            ready_timeout=ready_timeout,
            codec=codec,
            pool_options=settings,
            **env_options,
        )

    # -- properties ----------------------------------------------------------------

    @property
    def envs(self) -> list[Env[ActT, ObsT, StateT]]:
        """The sessions' clients, by index (a copy of the list; use them only between pool calls)."""
        return list(self._sessions.envs)

    @property
    def providers(self) -> list[Provider | None]:
        """The providers of the servers the pool started, by session index (``None`` for given URLs).

        Sessions that share a server (``max_servers`` below the size) share its provider.
        """
        return list(self._sessions.providers)

    @property
    def pool_options(self) -> PoolOptions:
        """The pool's options (given as keyword arguments or as one [`PoolOptions`][openenv.sync.PoolOptions])."""
        return self._pool_options

    @property
    def metrics(self) -> PoolMetrics:
        """A snapshot: sessions healthy, requests in flight and queued, failures and replacements so far."""
        return self._core.metrics([not env.closed for env in self._sessions.envs])

    @property
    def last_errors(self) -> dict[int, OpenEnvError]:
        """The errors of the last ``reset``/``step``/``recv``, by index (replaced sessions included)."""
        return dict(self._last_errors)

    @property
    def closed(self) -> bool:
        """Whether [`close()`][openenv.sync.EnvPool.close] was called."""
        return self._life.closed

    def __len__(self) -> int:
        return len(self._sessions.envs)

    def __repr__(self) -> str:
        m = self.metrics
        status = "closed" if self._life.closed else f"{m.active}/{m.size} active"
        return f"<{type(self).__name__} {status} in_flight={m.in_flight} queued={m.queued}>"

    # -- opening and closing -------------------------------------------------------------

    def connect(self) -> Self:
        """Open every session concurrently (waiting while a server is at capacity); return the pool.

        At most 64 handshakes are under way at a time; the others start as
        places free up, each with its own ``connect_timeout``.  Idempotent.
        While a server stays full past the quick retries, the sessions this
        call opened on it are let go and tried again with the others (no pool
        holds part of a server while it waits for the rest, so pools that share
        one do not lock each other out); sessions already open are left as they
        are.  On failure (or interrupted) what it opened is closed again;
        ``connect()`` may be called again.

        Raises:
            PoolError: a session could not be opened (``errors`` by index).
            CapacityReached: the server stayed full for ``capacity_timeout``
                seconds (when that is the only failure).
        """
        self._life.check_open()
        with self._guard:
            self._opening.open_envs(self._sessions.envs, range(len(self._sessions.envs)), renew=True)
            self._life.opened = True
        return self

    def close(self) -> None:
        """Close every session and stop every server the pool started.

        Idempotent.  Everything is closed even when some of it fails; the first
        failure is raised at the end.  Requests in flight are abandoned.
        """
        if self._life.closed:
            return
        self._life.closed = True
        try:
            self._flight.abandon_all()
        finally:  # whatever the books say, the sessions and servers go
            close_all(self._sessions.envs, unique(self._sessions.providers))

    def __enter__(self) -> Self:
        return self._connect_or_close()

    def _connect_or_close(self) -> Self:
        """``connect()``, or close the pool (and stop the servers it started) and re-raise."""
        try:
            return self.connect()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reset and step ------------------------------------------------------------------------

    def reset(
        self,
        seed: int | Sequence[int | None] | None = None,
        ids: Sequence[int] | None = None,
        kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[StepResult[ObsT]]:
        """Start a new episode on each session of ``ids`` (default: all); return their results in that order.

        Every reset is sent before any reply is read.  A session marked failed
        is reset too (reconnecting first), which clears the mark.  A fresh
        session whose server answers ``CAPACITY_REACHED`` is retried with
        backoff up to ``capacity_timeout`` (OpenEnv's servers refuse with the
        first reset).  Past the quick retries, the sessions of the call that
        the full server did reset are let go while it waits and reset again
        with the others (no hold and wait: pools sharing a server take turns),
        so when the wait runs out they too may be in ``PoolError.errors``
        (with ``on_failure="replace"`` too: a new session on a full server
        would only wait again).

        Args:
            seed: ``None`` (no seed sent), one seed per session (``None``
                entries send none), or an int ``s``: the k-th session of ``ids``
                gets ``s + k``.
            ids: the sessions, by index (default: all, in order).
            kwargs: other arguments of the environment's ``reset``: one dict
                for all sessions, or one dict (or ``None``) per session.

        Returns:
            One result per session of ``ids``, in that order.

        Raises:
            PoolError: sessions failed (``on_failure="raise"``) or could not
                be replaced; ``results`` holds the others.
            SessionBusy: another pool call is running, ``send`` replies
                are outstanding, or a session is checked out.
            EnvClosed: the pool is closed.
        """
        with self._guard:
            self._life.check_open()
            self._core.check_idle()
            order = self._core.ids(ids)
            self._core.check_free(order)
            jobs = self._core.plan_reset(order, seed, kwargs)
            self._flight.forget(order)  # a failure reported earlier and not read yet is about the old episode
            return self._run(PoolCall.RESET, order, jobs)

    def step(
        self, actions: Sequence[ActT | Mapping[str, Any]], ids: Sequence[int] | None = None
    ) -> list[StepResult[ObsT]]:
        """Step each session of ``ids`` (default: all) with its action; return the results in that order.

        Every action is sent before any reply is read (within
        ``max_concurrency``), so the sessions step concurrently; each reply is
        due within ``message_timeout`` of its send.  Replies are read in order,
        or, while requests wait for a ``max_concurrency`` slot, whichever is in
        first (so that the next request goes out at once).  With ``autoreset``, a
        session whose episode ended is reset instead (see the class).

        Args:
            actions: one action per session of ``ids``.
            ids: the sessions, by index (default: all, in order).

        Returns:
            One result per session of ``ids``, in that order.

        Raises:
            PoolError: sessions failed (``on_failure="raise"``) or could not
                be replaced; ``results`` holds the others.
            InvalidAction: the codec refused an action; nothing was sent.
            TypeError: ``actions`` is one action (a dict or a model) instead of a list of them.
            ValueError: the number of actions differs from the number of sessions, or ``ids`` repeats one.
            IndexError: an index of ``ids`` is out of range.
            SessionBusy: another pool call is running, ``send`` replies
                are outstanding, or a session is checked out.
            EnvClosed: the pool is closed.
        """
        with self._guard:
            self._life.check_open()
            self._core.check_idle()
            order = self._core.ids(ids)
            self._core.check_free(order)
            jobs = self._core.plan_step(order, actions)
            return self._run(PoolCall.STEP, order, jobs)

    def _run(self, what: PoolCall, order: list[int], jobs: list[Job]) -> list[StepResult[ObsT]]:
        calls = self._flight.encode(jobs)  # InvalidAction before anything is sent
        self._last_errors = {}
        results: dict[int, StepResult[ObsT]] = {}
        errors: dict[int, OpenEnvError] = {}
        runnable = []
        for job in jobs:
            if job.kind is JobKind.FAILED:
                errors[job.index] = self._core.failed_error(job.index)
            else:
                runnable.append(job)
        with self._lock:
            self._core.claim(order, runnable)
        try:
            self._flight.fly(calls, results, errors)
            if what.waits_for_capacity:
                self._opening.retry_full(jobs, results, errors)
            self._life.check_open()  # close() from another thread or task ended the call: say so, not what it broke
            self._last_errors = dict(errors)
            self._opening.settle_failures(what, order, results, errors, jobs)
        except Exception:
            self._life.check_open()  # the same, when what it cut short raised (a replacement, a capacity wait)
            raise
        return [results[i] for i in order]

    # -- the asynchronous mode (EnvPool's send / recv) ----------------------------------------------------

    def send(self, actions: Sequence[ActT | Mapping[str, Any]], ids: Sequence[int] | None = None) -> None:
        """Send each session of ``ids`` its action, without reading replies (read them with ``recv``).

        The pair is EnvPool's ``send`` / ``recv`` (Gymnasium's ``step_async`` /
        ``step_wait``; this pool's ``recv`` returns the first to finish, as
        EnvPool's does, and the ``_async`` suffix stays the name of a flavour
        only).  Within
        ``max_concurrency`` the requests go out at once; the rest are queued
        and sent as replies are read.  Autoreset and failed sessions behave
        as in ``step`` (a failed session's outcome is reported by the next ``recv``).

        Args:
            actions: one action per session of ``ids``.
            ids: the sessions (default: all); none of them may have a reply outstanding.

        Raises:
            InvalidAction: the codec refused an action; nothing was sent.
            TypeError: ``actions`` is one action (a dict or a model) instead of a list of them.
            ValueError: the number of actions differs from the number of sessions, or ``ids`` repeats one.
            IndexError: an index of ``ids`` is out of range.
            SessionBusy: a session of ``ids`` has a reply outstanding or is
                checked out, or another pool call is running.
            EnvClosed: the pool is closed.
        """
        with self._guard:
            self._life.check_open()
            order = self._core.ids(ids)
            self._core.check_free(order)
            jobs = self._core.plan_step(order, actions)
            calls = self._flight.encode(jobs)
            with self._lock:
                self._core.claim(order, [job for job in jobs if job.kind is not JobKind.FAILED])
            self._flight.calls.update(calls)
            for job in jobs:
                if job.kind is JobKind.FAILED:
                    self._flight.ready.append(Completed(job.index, None, self._core.failed_error(job.index)))
            try:
                self._flight.ready.extend(self._flight.pump(self._flight.calls, {}))
            except BaseException:
                self._flight.abandon_all()
                raise

    def step_async(self, actions: Sequence[ActT | Mapping[str, Any]], ids: Sequence[int] | None = None) -> None:
        """Deprecated alias of [`send()`][openenv.sync.EnvPool.send], kept for one release.

        Raises:
            DeprecationWarning: as a warning (not an exception) on every call; then it does what ``send`` does.
        """
        warnings.warn(
            "EnvPool.step_async() is deprecated and will be removed in the next release: "
            "call EnvPool.send() (the same arguments; read the replies with recv())",
            DeprecationWarning,
            stacklevel=2,
        )
        self.send(actions, ids)

    def recv(self, min_results: int = 1, timeout: float | None = None) -> list[Completed[ObsT]]:
        """Return the replies of ``send`` requests as they arrive: at least ``min_results`` of them.

        Waits until ``min_results`` replies (or failures) are in, or until
        nothing is outstanding, or until ``timeout`` seconds passed (then it
        returns what arrived, possibly nothing).  Every reply already there is
        returned too, so the list may be longer than ``min_results``; it is in
        order of arrival.  A request with no reply within ``message_timeout``
        fails with ``MessageTimeout`` (its session is lost).  Queued requests
        are sent as slots free up.  Failures are reported, not raised: in
        ``Completed.error``, with ``replaced`` set when ``on_failure="replace"``
        replaced the session (its ``result`` is then the new episode's reset).

        Args:
            min_results: how many completions to wait for.
            timeout: seconds to wait at most (``None``: no limit; ``0``: only
                what is ready now, without waiting).

        Returns:
            The completions, each with the session's index.

        Raises:
            PoolError: a failed session could not be replaced
                (``on_failure="replace"``); ``errors[i]`` says why,
                ``results`` holds every session this call read, by index
                (``None`` at the unreplaced ones), and those completions are
                also returned by the next ``recv()``.
            ValueError: ``min_results`` is less than 1.
            InvalidOption: ``timeout`` is negative or not a number.
            SessionBusy: another pool call is running.
            EnvClosed: the pool is closed.
        """
        with self._guard:
            self._life.check_open()
            if min_results < 1:
                raise ValueError(f"min_results must be at least 1, not {min_results}")
            poll = timeout == 0 and not isinstance(timeout, bool)
            deadline = Deadline(0.0 if poll else check_timeout("timeout", timeout))
            done = self._flight.collect(min_results, deadline)
            self._life.check_open()  # close() from another thread or task ended the wait
            self._last_errors = {c.index: c.error for c in done if c.error is not None}
            if self._core.on_failure != "replace":
                return done
            return self._opening.replace_completed(done)

    # -- replacing, resizing, checking out -----------------------------------------------------------

    def replace(self, index: int) -> StepResult[ObsT]:
        """Recreate session ``index`` and reset it: a new connection, and a new server when the pool started them.

        The old client is closed (and its server stopped).  Creating and
        resetting are tried ``replace_attempts`` times with backoff; opening
        waits while the server is at capacity.

        Args:
            index: the session.

        Returns:
            The new episode's first result.

        Raises:
            PoolError: every attempt failed (``errors[index]`` is the last error).
            SessionBusy: the session has a reply outstanding or is checked
                out, or another pool call is running.
            EnvClosed: the pool is closed.
        """
        with self._guard:
            self._life.check_open()
            index = self._core.index(index)
            self._core.check_free([index])
            return self._opening.replace(index)

    def resize(self, size: int) -> None:
        """Grow or shrink the pool to ``size`` sessions.

        Growing adds sessions at the end: on the same server for a
        one-server pool, round-robin over the URLs of a list, or new servers
        from the factory of a ``from_provider``/``from_docker_image`` pool; they
        are opened at once when the pool is open.  Shrinking closes the last
        sessions (and stops their servers).

        Args:
            size: the new number of sessions.

        Raises:
            PoolError: a new session could not be opened (nothing is added then).
            BootstrapError: a new server could not be started (nothing is added then).
            SessionBusy: a session to remove has a reply outstanding or is
                checked out, or another pool call is running.
            EnvClosed: the pool is closed.
        """
        with self._guard:
            self._life.check_open()
            check_size(size)
            if size < len(self._sessions.envs):
                self._opening.shrink(size)
            else:
                self._opening.grow(size)

    def checkout(self) -> PoolCheckout[ActT, ObsT, StateT]:
        """Take a free session's client out of the pool for exclusive use; it goes back at the end of the block.

        Use it as a context manager (entered like the pool itself): the block
        gets the [`Env`][openenv.sync.Env] of the lowest free session.  While it
        is out, a pool call naming that session raises ``SessionBusy``.  Its
        episode state is unknown when it comes back (no autoreset on its next
        step).  A TRL-style pattern: each rollout worker
        checks a session out of a shared pool.

        Returns:
            The context manager; entering it takes the session.

        Raises:
            SessionBusy: on entering, when no session is free (all checked out, busy or failed).
            EnvClosed: on entering, when the pool is closed.
        """
        return PoolCheckout(self)
