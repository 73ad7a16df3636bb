# GENERATED from src/openenv/_async/env.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The session client: one ``Env`` is one environment session on an OpenEnv server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import Self, TypeVar, Unpack

from .._blocking.sources import hosted_headers
from .._core import mcp
from .._core.codec import Codec, as_codec
from .._core.errors import ConnectError, EnvTimeout, OpenEnvError, SessionLost
from .._core.guard import InFlight
from .._core.mcp import McpState
from .._core.options import (
    DEFAULTS,
    READY_TIMEOUT,
    ClientOptions,
    EnvOptions,
    VerifyTypes,
    check_options,
    check_timeout,
)
from .._core.servers import dead_server_message
from .._core.session import Request, RequestKind, Session
from .._core.urls import Endpoints, parse_base_url, redact_url
from .bootstrap import start_providers
from .connection import _Connection
from .foreign import adopt_provider, provider_image
from .liveness import death_of
from .providers import DockerProvider, Provider
from .resolve import checkout_provider, locate, locate_for_provider, schema_codec
from .tools import _Tools

if TYPE_CHECKING:
    from .._core.result import StepResult

__all__ = ["Env"]

ActT = TypeVar("ActT", default=dict[str, Any])
ObsT = TypeVar("ObsT", default=dict[str, Any])
StateT = TypeVar("StateT", default=dict[str, Any])


class Env(_Tools, _Connection, Generic[ActT, ObsT, StateT]):
    """A client for one environment session on an OpenEnv server.

    The session lives on one WebSocket (``/ws``), opened by [`connect()`][openenv.sync.Env.connect],
    by the context manager, or by the first call.  Calls return plain dicts,
    or the environment's pydantic models when a typed [`Codec`][openenv.sync.Codec]
    is given.

    Args:
        base_url: the server, as ``http(s)://`` or ``ws(s)://`` (a trailing
            ``/ws``, path prefixes and query strings are handled).
        codec: how actions, observations and state look: a
            [`Codec`][openenv.sync.Codec], an environment's OpenEnv ``EnvClient``
            subclass (its ``client.py`` class, adopted unchanged with
            [`from_client()`][openenv.sync.Codec.from_client]), or ``None`` for plain dicts.
            For a codec built from the server's ``GET /schema``, use
            [`from_schema()`][openenv.sync.Env.from_schema] or ``from_env(..., codec="schema")``
            (``Env(...)`` itself does no IO).
        connect_timeout: seconds to open the WebSocket (``None``: no limit).
        message_timeout: seconds to wait for each reply (``None``: no limit).
            When it runs out the session is lost (see [`MessageTimeout`][openenv.sync.MessageTimeout]).
        max_message_size: largest message accepted from the server, in bytes
            (``None``: no limit).  Large observations such as screenshots need room.
        ping_interval: seconds between keepalive pings (``None``: off).
        ping_timeout: seconds to wait for a pong before dropping (``None``: off).
        headers: extra HTTP headers for the WebSocket upgrade and the HTTP
            calls, such as ``{"Authorization": "Bearer ..."}``.  Their values
            are never shown in reprs, logs or errors (only a few harmless
            ones such as ``User-Agent`` appear in debug logs).  Checked here:
            a value with a line break (a token read from a file) raises
            [`InvalidHeader`][openenv.sync.InvalidHeader].
        compression: negotiate permessage-deflate: ``None`` (default) turns it
            on for remote hosts and off for loopback and private addresses,
            where it only burns CPU.
        mode: ``"simulation"`` (default) or ``"production"``; ``None`` reads
            ``$OPENENV_CLIENT_MODE``.  It only changes how MCP tools are
            reached (see [`list_tools()`][openenv.sync.Env.list_tools]); fixed at construction.
        verify: how to check an ``https``/``wss`` server's certificate, as in
            httpx: ``True`` (default: the system trust store for the
            WebSocket, httpx's for HTTP calls), the path of a CA bundle
            (``str`` or ``Path``), or an `ssl.SSLContext`.  ``False``
            turns verification off: anyone on the path can then read and
            change the traffic, tokens included; use it only for tests.
            Applies to every connection the client makes.

    Timeouts are seconds: ``None`` or ``float("inf")`` means no limit; zero,
    negative and ``nan`` values raise [`InvalidOption`][openenv.sync.InvalidOption].

    The client keeps the protocol honest: one request is in flight at a time
    (a concurrent call raises [`SessionBusy`][openenv.sync.SessionBusy]), a reply of the
    wrong type raises [`ProtocolError`][openenv.sync.ProtocolError], and a connection lost in
    the middle of an episode raises [`SessionLost`][openenv.sync.SessionLost] instead of
    silently continuing in a fresh, un-reset session.  A reply the codec
    cannot parse raises [`ParseError`][openenv.sync.ParseError] (with the raw reply) and
    leaves the session as it is; an action the codec refuses raises
    [`InvalidAction`][openenv.sync.InvalidAction] before anything is sent.

    Raises:
        TypeError: ``codec`` is none of the above (or ``"schema"``).
    """

    _endpoints: Endpoints
    _options: ClientOptions
    _codec: Codec[Any, Any, Any]

    def __init__(
        self,
        base_url: str,
        *,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | None = None,
        connect_timeout: float | None = DEFAULTS.connect_timeout,
        message_timeout: float | None = DEFAULTS.message_timeout,
        max_message_size: int | None = DEFAULTS.max_message_size,
        ping_interval: float | None = DEFAULTS.ping_interval,
        ping_timeout: float | None = DEFAULTS.ping_timeout,
        headers: Mapping[str, str] | None = None,
        compression: bool | None = DEFAULTS.compression,
        mode: str | None = None,
        verify: VerifyTypes = DEFAULTS.verify,
    ) -> None:
        self._endpoints = parse_base_url(base_url)
        self._mode = mcp.resolve_mode(mode)
        self._options = ClientOptions(
            connect_timeout=connect_timeout,
            message_timeout=message_timeout,
            max_message_size=max_message_size,
            ping_interval=ping_interval,
            ping_timeout=ping_timeout,
            headers=dict(headers or {}),
            compression=compression,
            verify=verify,
        )
        self._codec = as_codec(codec)
        # a step calls the codec's own functions, unless a subclass overrides OpenEnv's hooks (the step
        # is the hot path: bench/README.md, "The request path at the floor")
        encode, parse = self._codec._step_functions()
        cls = type(self)
        self._encode_step = encode if cls._step_payload is Env._step_payload else self._step_payload
        self._parse_step = parse if cls._parse_result is Env._parse_result else self._parse_result
        self._provider: Provider | None = None
        self._tools_cache = None
        self._resources = ExitStack()
        self._reset_connection_state()

    def _reset_connection_state(self) -> None:
        self._guard = InFlight()
        self._stack = None
        self._ws = None
        self._loop = None
        self._asked = None
        self._session = Session(redact_url(self.base_url))
        self._children: list[Env[Any, Any, Any]] = []
        self._mcp = McpState()

    # -- public properties ---------------------------------------------------

    @property
    def base_url(self) -> str:
        """The normalised base URL of the server (read-only), secrets included.

        As given: ``user:password@`` credentials and query values such as
        ``?token=...`` are kept, since this is what another client needs to
        reach the same server (``Env(env.base_url, ...)``; ``environment_factory``
        and the pools pass it on so).  Treat it as a secret when it carries
        one: the library itself never shows it unredacted (reprs, logs and
        errors use ``redact_url``: ``http://***@host/?token=***``).
        """
        return self._endpoints.base_url

    @property
    def codec(self) -> Codec[Any, Any, Any]:
        """The codec that shapes actions, observations and state."""
        return self._codec

    @property
    def options(self) -> ClientOptions:
        """The connection options (headers hidden in its repr)."""
        return self._options

    @property
    def provider(self) -> Provider | None:
        """The provider that started the server (``from_docker_image``, ``from_env``, ...), if any."""
        return self._provider

    @property
    def connected(self) -> bool:
        """Whether the session's WebSocket is open."""
        return self._ws is not None

    @property
    def closed(self) -> bool:
        """Whether [`close()`][openenv.sync.Env.close] was called."""
        return self._session.closed

    def __repr__(self) -> str:
        status = "closed" if self._session.closed else "connected" if self._ws is not None else "not connected"
        return f"<{type(self).__name__} {redact_url(self.base_url)} {status}>"

    # -- connection ----------------------------------------------------------

    def connect(self) -> Self:
        """Open the session's WebSocket and return this client.

        Optional: the context manager and the first call connect for you.  After
        a lost session, this opens a new one (reset it before stepping).

        Raises:
            ConnectError: the server refused or could not be reached.
            ConnectTimeout: the handshake took longer than ``connect_timeout``.
        """
        self._connect()
        return self

    def disconnect(self) -> None:
        """Close the session's WebSocket (ending its episode); the client can connect again."""
        with self._guard:
            self._shutdown(send_close=True)
            self._session.forget_loss()

    def close(self) -> None:
        """End the session, the sessions of [`new_session()`][openenv.sync.Env.new_session] and what the client started.

        Idempotent.  A call in flight on another task or thread fails with
        [`SessionLost`][openenv.sync.SessionLost].  It waits for the server's
        closing handshake at most ``message_timeout`` seconds, and never more
        than 5 s: a server that does not answer (hung, or unreachable) is then
        dropped.
        """
        if self._session.closed:
            return
        self._session.closed = True
        self._drop_handshake()
        children, self._children = self._children, []
        try:
            for child in children:
                child.close()
            self._shutdown(send_close=True)
        except BaseException:
            # cancelled or interrupted while closing: drop every socket left at once
            for child in children:
                child._session.closed = True
                child._lose_now(Session.CLOSED, had_episode=False)
            self._lose_now(Session.CLOSED, had_episode=False)
            raise
        finally:
            self._resources.close()

    def __enter__(self) -> Self:
        return self._connect_or_close()

    def _connect_or_close(self, *, parent: Env[Any, Any, Any] | None = None) -> Self:
        """Connect, or close this client (and what it started) and re-raise; ``parent`` must stay open."""
        try:
            self.connect()
            if parent is not None:
                parent._check_open()  # closed while the child connected
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def new_session(self) -> Self:
        """Open another session on the same server, with the same options and codec.

        The new client is connected, and closed together with this one.

        Raises:
            CapacityReached: the server has no free slot: raised here when the
                server refuses the handshake (this package's server does), or on
                the first call of the new session (OpenEnv's servers report
                capacity only then).
        """
        self._check_open()
        # a fresh instance (never a copy: a subclass's mutable state is not shared), same configuration
        child = type(self)(self.base_url, codec=self._codec, mode=self._mode)
        child._endpoints, child._options, child._tools_cache = self._endpoints, self._options, self._tools_cache
        child._connect_or_close(parent=self)
        self._children.append(child)
        return child

    # -- one-line constructors ---------------------------------------------------

    @classmethod
    def from_provider(
        cls,
        provider: Provider | Any,
        *,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | str | None = None,
        ready_timeout: float | None = READY_TIMEOUT,
        **options: Unpack[EnvOptions],
    ) -> Self:
        """Start a server with ``provider``, wait until it is healthy, and return a connected client.

        Closing the client stops the provider.  A failure anywhere (start,
        readiness, connect), an exception or a cancellation stops it before
        the error propagates, so nothing is left running.

        Args:
            provider: any object with ``start``, ``wait_until_ready`` and ``stop``
                (see [`Provider`][openenv.sync.Provider]), or an OpenEnv provider
                object, unchanged: a ``RuntimeProvider`` (``UVProvider``, ...), or a
                ``ContainerProvider`` wrapped with its image in
                [`OpenEnvProvider`][openenv.sync.OpenEnvProvider] (see the providers guide).
            codec: as for ``Env(...)``, or ``"schema"``: a codec built from
                the server's ``GET /schema`` once it is ready ([`from_schema()`][openenv.sync.Codec.from_schema]).
            ready_timeout: seconds for the server to answer ``GET /health``
                (``None`` or ``inf``: no limit).
            **options: the connection options of ``Env(...)``; ``verify`` also
                applies to the health checks of a [`ServerProvider`][openenv.sync.ServerProvider]
                (passed to its ``wait_until_ready``: the provider object is not changed).

        Raises:
            InvalidOption: an option or ``ready_timeout`` is out of range.
            TypeError: ``provider`` is not a provider (the message names the accepted shapes).
        """
        provider = adopt_provider(provider)
        ready_timeout = check_timeout("ready_timeout", ready_timeout)
        check_options(options, f"{cls.__name__}.from_provider")  # refuse bad options before starting anything
        try:
            (base_url,) = start_providers([provider], ready_timeout, verify=options.get("verify"))
            resolved = schema_codec(codec, base_url, options)
            env = cls(base_url, codec=resolved, **options)
        except BaseException:
            provider.stop()
            raise
        env._provider = provider
        env._resources.callback(provider.stop)
        return env._connect_or_close()

    @classmethod
    def from_docker_image(
        cls,
        image: str,
        *,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | str | None = None,
        env_vars: Mapping[str, str] | None = None,
        run_options: Mapping[str, Any] | None = None,
        port: int | None = None,
        pull: bool | None = None,
        ready_timeout: float | None = READY_TIMEOUT,
        provider: Any = None,
        **options: Unpack[EnvOptions],
    ) -> Self:
        """Run ``image`` in a local Docker engine and return a client connected to it.

        The container port 8000 is published on 127.0.0.1 with a port Docker
        picks (or ``port``); the client waits for ``GET /health``, connects,
        and removes the container when closed.  If anything fails, the
        container is removed and the error says why (with the container's
        exit code and last log lines when it died).

        Args:
            image: the image reference, such as ``"echo-env:latest"``.
            codec: as for [`from_provider()`][openenv.sync.Env.from_provider] (``"schema"`` included).
            env_vars: environment variables for the container.
            run_options: extra docker-py ``containers.create`` options
                (``mem_limit``, ``nano_cpus``, ``volumes``, ...).
            port: a fixed host port.
            pull: ``None`` pulls when missing, ``True`` always, ``False`` never.
            ready_timeout: seconds for the server to become healthy.
            provider: an OpenEnv ``ContainerProvider`` to run ``image`` with, as in
                OpenEnv's own ``from_docker_image(image, provider=...)``:
                ``LocalDockerProvider()`` runs as our Docker provider, any other one
                (a cloud sandbox) through [`OpenEnvProvider`][openenv.sync.OpenEnvProvider].
            **options: the connection options of ``Env(...)``.

        Raises:
            DockerUnavailable: no Docker engine answered (or ``docker`` is not installed).
            ImageNotFound: the image is not present and could not be pulled.
            ContainerExited: the container stopped before it became ready (with its logs).
            ReadinessTimeout: the server did not become healthy within ``ready_timeout``.
        """
        check_options(options, f"{cls.__name__}.from_docker_image")  # before the container starts
        if provider is None:
            provider = DockerProvider(image, env_vars=env_vars, run_options=run_options, port=port, pull=pull)
        else:
            provider = adopt_provider(
                provider, image=image, env_vars=env_vars, port=port, run_options=run_options, pull=pull
            )
        return cls.from_provider(provider, codec=codec, ready_timeout=ready_timeout, **options)

    @classmethod
    def from_env(
        cls,
        source: str,
        *,
        codec: Codec[ActT, ObsT, StateT] | type[Any] | str | None = None,
        use_docker: bool = True,
        provider: Provider | Any | None = None,
        tag: str = "latest",
        registry: str | None = None,
        env_vars: Mapping[str, str] | None = None,
        port: int | None = None,
        command: Sequence[str] | None = None,
        install: bool = False,
        ready_timeout: float | None = READY_TIMEOUT,
        base_url: str | None = None,
        **options: Unpack[EnvOptions],
    ) -> Self:
        """Connect to an environment given by a URL, a Docker image, a local checkout, a Space id or a package's name.

        ``source`` is read by the same rules everywhere (``Env.from_schema``,
        ``EnvPool.from_env``, ``environment_factory``, ``python -m openenv``):

        * ``"https://owner-name.hf.space"`` or any ``http(s)://``/``ws(s)://``
          URL (or ``localhost:PORT``): connect to the running server (no local
          resources).  For ``*.hf.space`` hosts, ``$HF_TOKEN`` is sent as a
          bearer token.
        * a Docker image with its tag or digest (``"echo-env:latest"``,
          ``"ghcr.io/team/env:v1"``), or ``"docker:NAME"``: run it as
          [`from_docker_image()`][openenv.sync.Env.from_docker_image] does.
        * a local directory (an OpenEnv environment checkout: ``openenv.yaml``,
          ``server/app.py``, ``pyproject.toml``): run its server as a local
          process on 127.0.0.1 (no Docker), ``<python> -m uvicorn <app> --fd
          <fd>`` with the ``app`` of its ``openenv.yaml`` (default
          ``server.app:app``) and a listening socket bound here and handed
          over.  ``<python>`` is, in this order:

          1. the checkout's own ``.venv/bin/python``;
          2. with ``install=True`` and no ``.venv``: a ``.venv`` created in
             the checkout with ``pip install -e <checkout> uvicorn`` (which
             runs the checkout's build backend);
          3. ``uv run --project <checkout> python`` when ``uv`` is on ``PATH``
             (uv creates the checkout's ``.venv`` and installs it there);
          4. the current interpreter, if it can import ``uvicorn`` and the app
             (tried in a subprocess, with ``env_vars`` set);
          5. otherwise [`CheckoutNotRunnable`][openenv.sync.CheckoutNotRunnable] says what to do.

          This runs the checkout's own code: use checkouts you trust.  When
          the app's module imports relative to the package root (``from
          ..models import ...``, as OpenEnv's chess and grid_world do), the
          server runs ``<package>.server.app:app`` as their Dockerfiles do
          (the provider's ``served_app`` says which app runs).

          ``command`` replaces all of that: ``{fd}`` is filled in with the
          listening socket's file descriptor, ``{port}`` with its port (without
          ``{fd}`` the port is only free a moment before the start: racy) and
          ``{host}`` with 127.0.0.1.
        * ``"owner/name"``: with ``use_docker`` (default) run the Space's image
          ``<registry>/<subdomain>:<tag>``, pulled when missing (registry:
          ``registry``, else ``$OPENENV_SPACE_REGISTRY``, else
          ``registry.hf.space``); without it, connect to the hosted Space.
        * the name of an installed OpenEnv environment package, as OpenEnv's
          ``AutoEnv`` takes it (``"echo"``, ``"echo-env"``, ``"echo_env"``,
          ``"openenv-echo-env"`` for ``pip install openenv-echo-env``): run its
          default image (its ``openenv.yaml``'s ``image``, else
          ``<name-with-dashes>:latest``, such as ``echo-env:latest``), or with
          ``base_url`` connect to a server already running.  The client is typed
          with the package's own client class (``echo_env.client:EchoEnv``) when
          it imports, unless ``codec`` is given.  Nothing is ever installed: an
          unknown name lists the installed packages and says how to install one.
          An image is never named without its tag (``docker:NAME`` is the image).

        ``provider`` replaces all of that with your own provider, or an OpenEnv
        provider object, unchanged (a ``ContainerProvider`` runs the image
        ``source`` names, or ``source`` itself; see the providers guide); a package's
        name then still types the client with the package's own client class.  The other
        arguments are as for [`from_docker_image()`][openenv.sync.Env.from_docker_image].

        A server or container started here is stopped when the client is
        closed; if it never is, when the interpreter exits; and if the program
        is killed, by a watcher process within seconds.

        Args:
            source: a URL, a Docker image, a local checkout directory (a path
                written ``./x``, ``../x``, ``/x`` or ``~/x`` must exist), or a
                Space id ``owner/name`` (``space:`` forces it).
            codec: as for ``Env(...)``, or ``"schema"``: typed from the server's
                ``GET /schema`` once it is ready (see [`from_schema()`][openenv.sync.Env.from_schema]).
            use_docker: run a Space's image (``True``) or connect to the hosted Space.
            provider: your own provider instead.
            tag: the Space image's tag.
            registry: the registry of Space images.
            env_vars: environment variables for the server.
            port: a fixed host port.
            command: the server command for a checkout (see above).
            install: create and fill a checkout's ``.venv`` when it has none.
            ready_timeout: seconds for the server to become healthy.
            base_url: connect to the server at this URL instead of starting one
                (``source`` then only chooses the codec: a package's client).
            **options: the connection options of ``Env(...)``.

        Raises:
            TypeError: both ``base_url`` and ``provider`` were given.
            CheckoutNotRunnable: no interpreter can run the checkout, or the
                directory is not an OpenEnv environment (no ``openenv.yaml``, no ``server/app.py``).
            InvalidURL: ``source`` names none of those kinds, or is a path to
                a directory that does not exist.
            ProviderError: the server or container could not be started.
        """
        check_options(options, f"{cls.__name__}.from_env")  # before any server starts
        if base_url is not None and provider is not None:
            raise TypeError(
                f"{cls.__name__}.from_env() takes base_url= (connect to a server already running) or provider= "
                "(start one), not both"
            )
        if base_url is not None:  # a running server: ``source`` only types the client
            running = parse_base_url(base_url).base_url
            _, typed = locate(source, codec, use_docker=use_docker, tag=tag, registry=registry)
            options["headers"] = hosted_headers(running, options.get("headers"))
            resolved = schema_codec(typed, running, options)
            return cls(running, codec=resolved, **options)._connect_or_close()
        if provider is None:
            where, codec = locate(source, codec, use_docker=use_docker, tag=tag, registry=registry)
            if where.kind == "url":
                options["headers"] = hosted_headers(where.target, options.get("headers"))
                resolved = schema_codec(codec, where.target, options)
                return cls(where.target, codec=resolved, **options)._connect_or_close()
            if where.kind == "image":
                provider = DockerProvider(where.target, env_vars=env_vars, port=port)
            else:
                provider = checkout_provider(where.target, command, env_vars, port, install)
        else:
            named, codec = locate_for_provider(source, codec)  # a package's name: still its own client
            provider = adopt_provider(provider, image=provider_image(source, named), env_vars=env_vars, port=port)
        return cls.from_provider(provider, codec=codec, ready_timeout=ready_timeout, **options)

    @classmethod
    def from_schema(cls, target: str, **kwargs: Any) -> Env[Any, Any, Any]:
        """A connected client typed from the server's ``GET /schema``.

        The same as ``from_env(target, codec="schema", **kwargs)``, so
        ``target`` is anything [`from_env()`][openenv.sync.Env.from_env] takes (a URL, a Docker image, a checkout
        directory, a Space id) and ``kwargs`` are its other arguments.  The
        ``action``, ``observation`` and ``state`` JSON Schemas become pydantic
        models at runtime ([`openenv.Codec.from_schema()`][openenv.sync.Codec.from_schema]): actions are
        validated before sending, observations and state come back as models,
        and a reset observation of another shape (an MCP environment's) comes
        back as a permissive base observation.  ``env.codec.action_type``
        builds actions.

        Raises:
            ConnectError: ``/schema`` could not be fetched.
            ProtocolError: ``/schema`` did not answer a JSON object.
        """
        return cls.from_env(target, codec="schema", **kwargs)

    # -- the protocol ----------------------------------------------------------

    def _server_gone(self, exc: ConnectError | SessionLost) -> OpenEnvError | None:
        """The error to raise instead of ``exc`` when the server this client started has died, else ``None``.

        (``_request()`` asks: a failed connection to a server this client started says so when it died,
        since ``reset()`` cannot help.)
        """
        if self._provider is None or isinstance(exc, EnvTimeout):  # a timeout: slow, not dead (a death drops it)
            return None
        reason = death_of(self._provider)
        if reason is None:
            return None
        message = dead_server_message(reason, replaced_by="a new client")
        return SessionLost(message) if isinstance(exc, SessionLost) else ConnectError(message)

    def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        """Start a new episode; ``kwargs`` (``seed``, ``episode_id``, ...) go to the environment's ``reset``.

        After a lost session this reconnects first: a reset starts afresh anyway.
        """
        return self._request(self._reset_request(kwargs))

    def _reset_request(self, kwargs: Mapping[str, Any]) -> Request[StepResult[ObsT]]:
        """The request ``reset(**kwargs)`` sends: kind, frame and reply parser (a pool sends it through the seam)."""
        return Request(RequestKind.RESET, kwargs, self._parse_reset)

    def _step_request(self, action: Any) -> Request[StepResult[ObsT]]:
        """The request ``step(action)`` sends (the codec checks the action here: nothing is sent yet).

        Raises:
            InvalidAction: the codec refused the action.
        """
        return Request(RequestKind.STEP, self._encode_step(action), self._parse_step)

    def step(self, action: ActT | Mapping[str, Any], **kwargs: Any) -> StepResult[ObsT]:
        """Send one action and return the step result.

        ``action`` is a dict, or the environment's action model for a typed
        client (a dict is then validated against the model before sending).

        Before any episode (no ``reset`` yet on this connection), a step that
        finds the connection already closed (a server restart, an idle
        timeout), so that the frame could not even be sent, is sent once more
        on a fresh connection: the server never received it.  A step that was
        sent is never re-sent, and nothing is re-sent during an episode.

        Raises:
            InvalidAction: the codec refused the action; nothing was sent.
            InvalidActionType: the action is of the wrong type, or holds a
                value JSON cannot carry; nothing was sent.
            ParseError: the step happened but its reply did not match the
                codec (``payload`` holds it); the session goes on.
            ServerValidationError: the server refused the action.
            ExecutionError: the environment raised; the session continues.
            SessionLost: the connection was lost during this episode.
            ProtocolError: the reply broke the protocol; the connection is closed.
        """
        if kwargs:
            raise TypeError(
                f"step() got keyword arguments {sorted(kwargs)}; the OpenEnv WebSocket protocol "
                "has no way to send them (put them in the action instead)"
            )
        return self._request(self._step_request(action))

    def state(self) -> StateT:
        """The session's state (``episode_id``, ``step_count`` and the environment's fields).

        Raises:
            ParseError: the reply did not match the codec's state model (``payload`` holds it).
        """
        return self._request(Request(RequestKind.STATE, None, self._parse_state))

    # OpenEnv's hooks: override them in a subclass, or (better) give a Codec.

    def _step_payload(self, action: ActT) -> dict[str, Any]:
        """OpenEnv's hook: turn an action into the JSON object sent in the ``step`` frame.

        Delegates to the codec ([`Codec._step_payload()`][openenv.sync.Codec._step_payload]).
        A subclass ported from OpenEnv's ``EnvClient`` may override it; new
        code should give a [`Codec`][openenv.sync.Codec] instead.

        Args:
            action: what was passed to ``step``.

        Returns:
            The ``data`` of the ``step`` frame.

        Raises:
            InvalidAction: the codec refused the action.
        """
        return self._codec._step_payload(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """OpenEnv's hook: turn the ``data`` of an ``observation`` frame into a [`StepResult`][openenv.sync.StepResult].

        Delegates to the codec ([`Codec._parse_result()`][openenv.sync.Codec._parse_result]).
        When a subclass overrides it, it parses ``reset`` replies too (as in OpenEnv).

        Args:
            payload: the frame's ``data``.

        Returns:
            The step's result.

        Raises:
            ParseError: the reply does not match the codec's observation model.
        """
        return self._codec._parse_result(payload)

    def _parse_reset(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Turn the ``data`` of a ``reset`` reply into a [`StepResult`][openenv.sync.StepResult].

        An override of [`_parse_result()`][openenv.sync.Env._parse_result] wins;
        otherwise the codec parses it (with its ``reset_observation`` model when it has one).

        Args:
            payload: the reply's ``data``.

        Returns:
            The first result of the episode.

        Raises:
            ParseError: the reply matches none of the codec's observation models.
        """
        if type(self)._parse_result is not Env._parse_result:
            return self._parse_result(payload)  # a subclass overrode OpenEnv's hook: it parses resets too
        return self._codec._parse_reset(payload)

    def _parse_state(self, payload: dict[str, Any]) -> StateT:
        """OpenEnv's hook: turn the ``data`` of a ``state`` frame into the state.

        Delegates to the codec ([`Codec._parse_state()`][openenv.sync.Codec._parse_state]).

        Args:
            payload: the frame's ``data``.

        Returns:
            The state (a dict when the codec has no state model).

        Raises:
            ParseError: the state does not match the codec's state model.
        """
        return self._codec._parse_state(payload)  # type: ignore[no-any-return, unused-ignore]
