# GENERATED from src/openenv/_async/trl.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Any OpenEnv environment as a TRL environment class: ``environment_factory(target)``.

TRL's ``GRPOTrainer(environment_factory=cls)`` creates instances with
``cls()``, calls ``reset(**row)`` with each dataset row, offers every public
method other than ``reset`` to the model as a function-calling tool (its JSON
Schema read from the method's type hints and docstring by
``transformers.utils.get_json_schema``), and reads the episode's reward back.
`environment_factory()` writes that class for you, from what the server
says about itself: one method per MCP tool (or a ``step`` method built from the
action schema), with real signatures and docstrings.

Use the class from ``openenv.sync`` with TRL's ``GRPOTrainer``: it calls
``reset`` and the tools from plain code.  The ``openenv.aio`` class has the
same tools (and ``get_reward``) as coroutines, for rollouts written on an
event loop and for TRL's ``AsyncGRPOTrainer``, whose worker threads call its
``reset`` (it runs on the instance's loop).  Both pickle by recipe (`_Recipe`):
``AsyncGRPOTrainer`` pickles them into a process it starts with ``spawn``.
"""

from __future__ import annotations

import atexit
import copyreg
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from typing_extensions import Self, Unpack

from .._blocking.sources import classify_source, hosted_headers
from .._core import mcp
from .._core import trl as core
from .._core.capacity import POOL_BUSY_REMEDY, TOOLS_REMEDY, CapacityWait, instances_remedy
from .._core.errors import (
    CapacityReached,
    ConnectError,
    EnvClosed,
    EnvTimeout,
    ExecutionError,
    ServerValidationError,
    SessionBusy,
    SessionLost,
    ToolError,
)
from .._core.options import EnvOptions, check_options
from .._core.servers import DEFAULT_MAX_SERVERS, check_max_servers
from .._core.urls import hidden_label, hide_url, redact_url
from .._shim_sync import callable_from_threads, current_loop, new_lock, run_to_completion, sleep
from .env import Env
from .http import get_json
from .pool import EnvPool
from .providers import Provider
from .resolve import where_is
from .servers import Server, ServerSet

if TYPE_CHECKING:
    from .._core.tool_models import Tool

__all__ = ["environment_factory", "TRLEnvironment"]

logger = logging.getLogger("openenv.trl")

_NO_TOOLS_CODES = (mcp.METHOD_NOT_FOUND,)

#: Servers found dead during one ``reset`` after which it gives up (each was replaced by a new one)
_MAX_DEATHS = 3


class _Shared:
    """What the instances of one generated class share: the server, the options, the bookkeeping."""

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        servers: ServerSet,
        options: dict[str, Any],
        reset_keys: frozenset[str] | None,
        reward: str,
        render: Callable[[Any], str] | None,
        raise_tool_errors: bool,
        capacity_timeout: float | None,
        pool: EnvPool[Any, Any, Any] | None = None,
    ) -> None:
        self.name = name
        self.pool = pool  # sessions are checked out of it (the caller owns the pool)
        self.base_url = base_url
        # the servers the instances' sessions go to: the first one (its client owns the container or
        # process, if the class started it), and more started on demand; unused with a pool
        self.servers = servers
        self.options = options
        self.reset_keys = reset_keys
        self.reward = reward
        self.render = render
        self.raise_tool_errors = raise_tool_errors
        self.capacity_timeout = capacity_timeout
        self.lock = threading.Lock()
        self.instances: list[TRLEnvironment] = []
        self.closed = False
        self.dropped_logged = 0  # the level of the last "drops the dataset columns" line (0: none yet)
        self.recipe: _Recipe | None = None  # how to build the class again in another process (pickle)
        self.pid = os.getpid()
        atexit.register(self.at_exit)

    def add(self, instance: TRLEnvironment) -> None:
        with self.lock:
            self.check_open()
            if instance not in self.instances:
                self.instances.append(instance)

    def discard(self, instance: TRLEnvironment) -> None:
        with self.lock:
            if instance in self.instances:
                self.instances.remove(instance)

    def check_open(self) -> None:
        if self.closed:
            raise EnvClosed(f"{self.name} was closed (its server is gone); call environment_factory(...) again")

    def log_dropped(self, dropped: list[str]) -> None:
        """Say once which dataset columns ``reset`` does not forward (a warning unless only TRL's ``prompt``)."""
        # TRL hands reset the whole dataset row: its own "prompt" is never meant for the environment
        level = logging.WARNING if set(dropped) - {"prompt"} else logging.DEBUG
        with self.lock:
            if level <= self.dropped_logged:  # said once at each level (a warning after a debug line still comes)
                return
            self.dropped_logged = level
        forwards = ", ".join(sorted(self.reset_keys or ())) or "no column"
        logger.log(
            level,
            "%s.reset drops the dataset columns %s: it forwards only %s (reset_keys, else the keywords the server "
            "declares its reset takes, else seed and episode_id). Pass reset_keys=[...] (or reset_keys='all') "
            "to environment_factory to forward others; said once",
            self.name,
            dropped,
            forwards,
        )

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            instances, self.instances = self.instances, []
        atexit.unregister(self.at_exit)
        try:
            for instance in instances:
                instance._close_session()
        finally:
            self.servers.close()  # every server started for the class; a pool passed in stays open

    def at_exit(self) -> None:
        if self.closed:
            return
        try:
            run_to_completion(self.close)
        except Exception:  # best effort at interpreter exit
            logger.debug("closing %s at exit failed", self.name, exc_info=True)


class _Close:
    """``close()``: on an instance, ends its session; on the class, every session and the shared server.

    Neither a function nor a method (TRL offers every public method to the
    model as a tool); calling it returns what the bound close returns.
    """

    def __get__(self, instance: Any, owner: Any) -> _BoundClose:
        if instance is None:
            shared = getattr(owner, "_openenv", None)
            if shared is None:  # the base class TRLEnvironment itself: no session, no server, nothing to close
                return _BoundClose(_nothing, f"{owner.__name__}.close")
            return _BoundClose(shared.close, f"{owner.__name__}.close")
        return _BoundClose(instance._close_session, f"{owner.__name__}().close")


def _nothing() -> None:
    return None


class _BoundClose:
    """End the session (on an instance) or every session and the shared server (on the class); idempotent."""

    __slots__ = ("_fn", "_what")

    def __init__(self, fn: Callable[[], Any], what: str) -> None:
        self._fn = fn
        self._what = what

    def __call__(self) -> Any:
        return self._fn()

    def __repr__(self) -> str:
        return f"<{self._what}>"


class _ToolsMeta(type):
    """The metaclass of the generated classes: they pickle by recipe (`_reduce_class`)."""

    if TYPE_CHECKING:

        def __getattr__(cls, name: str) -> Any: ...  # the generated tool methods


class TRLEnvironment(metaclass=_ToolsMeta):
    """Base of the classes `environment_factory()` generates (one session per instance).

    Attributes:
        reward: the episode's reward so far (``reward="sum"``: the sum of the
            step rewards; ``"last"``: the last one reported); ``0.0`` after ``reset``.
        done: whether the environment ended the episode; further tool calls
            then answer that the episode is over, without reaching the server.
        tools: the server's MCP tools (class attribute; empty for a ``step`` class).
        base_url: the server's base URL (class attribute).
    """

    _openenv: ClassVar[_Shared]
    tools: ClassVar[tuple[Tool, ...]] = ()
    base_url: ClassVar[str] = ""
    close: _Close = _Close()

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...  # the generated tool methods

    def __init__(self) -> None:
        self.reward: float = 0.0
        self.done: bool = False
        self._env: Env[Any, Any, Any] | None = None
        self._checkout: Any = None  # the pool checkout holding ``_env``, when the class uses a pool
        self._server: Server | None = None  # the server of ``_env`` (not for a pool)
        self._loop: object | None = current_loop()  # the event loop the session lives on (aio; None: sync)
        self._lock = new_lock()  # one call at a time per instance (reset and tools): never SessionBusy
        self._last_reward: float | None = None  # the last tool call's own reward (harness sessions read it)
        self._last_error: str | None = None  # the last tool call's error text, or None
        self._closes = 0  # how often close() ran: a reset that sees it change lets go of what it got
        self._reset_from = 0  # ``_closes`` when the reset in progress began
        self._resetting = False  # a reset is running: close() leaves what it holds to that reset
        self._lost: str | None = None  # why its session went with a dead server (until the next reset)
        type(self)._openenv.add(self)

    @property
    def env(self) -> Env[Any, Any, Any] | None:
        """This instance's client (``None`` before the first ``reset``)."""
        return self._env

    def __repr__(self) -> str:
        status = "connected" if self._env is not None else "not connected"
        return f"<{type(self).__name__} {redact_url(self.base_url)} {status} reward={self.reward} done={self.done}>"

    def reset(self, **kwargs: Any) -> str | None:
        """Start a new episode and return its first observation as text.

        The text (``render``'s, or the default rule of
        ``openenv._core.trl.render_observation``) starts with a blank line
        (``"\\n\\n"``, unless it is empty or already starts with whitespace):
        TRL appends it to the prompt's last message as it is.

        ``kwargs`` is the dataset row: only the keywords the environment's
        ``reset`` takes are sent (``seed`` and ``episode_id`` unless the
        server declares others, or ``reset_keys`` says); the others are
        dropped, with one log line per class (logger ``openenv.trl``).  The
        first ``reset`` connects this instance's session, waiting with backoff
        while the server is at capacity (up to ``capacity_timeout`` seconds).
        When the class started the servers (a Docker image, a checkout) and
        this instance's server died, the dead one is stopped and dropped, and
        ``reset`` starts another (within ``max_servers``); a tool call that
        meets the dead server raises ``SessionLost`` saying so.

        The ``openenv.aio`` class: on the instance's event loop, ``reset`` gives
        a coroutine as usual; in a worker thread of that loop (TRL's
        ``AsyncGRPOTrainer`` calls it through ``loop.run_in_executor``), it runs
        on the loop and returns the text.  The instance's loop is the one running
        where it was created, or where ``env.reset`` was read, or where it was
        first used.  Calls on one instance run one at a time.

        Raises:
            CapacityReached: the server stayed full for ``capacity_timeout`` seconds.
            ConnectError: the class's only server died and it cannot start
                another (a provider or a fixed ``port``).
            SessionBusy: (a class over a pool) every session of the pool stayed
                checked out for ``capacity_timeout`` seconds.
            EnvClosed: the class was closed, or this instance was closed
                (from another task or thread) while the reset ran or waited:
                what the reset got is given back.
            TypeError: (``openenv.aio``) called with no event loop to run on:
                from plain code such as TRL's ``GRPOTrainer``, which needs the
                ``openenv.sync`` class.
            RuntimeError: (``openenv.aio``) the instance's session lives on
                another event loop.
        """
        self._check_loop()
        with self._lock:
            with self._openenv.lock:
                closes = self._reset_from = self._closes
                self._resetting = True
            try:
                text = self._reset_episode(kwargs)
            except BaseException as exc:
                if self._end_reset(closes):  # closed meanwhile: what the reset got goes back
                    self._let_go()
                    if isinstance(exc, Exception):  # (a cancellation or Ctrl-C stays what it is)
                        self._raise_closed(exc)
                raise
            if self._end_reset(closes):
                self._let_go()
                self._raise_closed(None)
            return text

    reset = callable_from_threads(reset, core.NO_LOOP)

    def _reset_episode(self, kwargs: dict[str, Any]) -> str | None:
        shared = self._openenv
        shared.check_open()
        self._lost = None
        kept, dropped = core.filter_reset(kwargs, shared.reset_keys)
        if dropped:
            shared.log_dropped(dropped)
        self.reward = 0.0
        self.done = False
        try:
            result = self._reset_session(kept)
        except ConnectError as exc:
            recipe = shared.recipe
            if recipe is None or recipe.origin_pid == shared.pid or shared.servers.grows:
                raise  # here, or a class that starts its own servers: the error is about those, as is
            unreachable = type(exc)(core.unpickled_unreachable_message(recipe.name, recipe.origin_pid, str(exc)))
            unreachable.status = exc.status
            raise unreachable from exc
        self._record(None, result.done)  # a reward reset reports is no step's: env.reward stays 0.0
        return core.reset_text(self._render_step(result))

    def _check_loop(self) -> None:
        """Bind the instance to the running event loop; refuse another loop while its session is open."""
        loop = current_loop()
        if loop is not self._loop and self._loop is not None and (self._env is not None or self._checkout is not None):
            raise RuntimeError(core.other_loop_message(type(self).__name__))
        self._loop = loop

    def _render_step(self, result: Any) -> str:
        render = self._openenv.render
        if render is not None:
            return render(result.observation)
        return core.render_observation(result.observation, result.metadata)

    def _reset_session(self, kwargs: dict[str, Any]) -> Any:
        shared = self._openenv
        wait = CapacityWait(shared.capacity_timeout, time.monotonic())  # the core decides; this only sleeps
        retry = wait.retry()
        refusal = CapacityReached("every server is at capacity", "CAPACITY_REACHED")  # the last one, for the error
        deaths = 0  # servers found dead during this reset
        while True:
            if self._closes != self._reset_from:  # closed while this reset waited: stop waiting
                raise EnvClosed(self._closed_message())
            if self._env is None:
                shared.add(self)  # again after close(): the class closes what it knows
                if shared.pool is not None:
                    checkout = shared.pool.checkout()
                    try:
                        self._env = checkout.__enter__()
                    except SessionBusy as exc:  # every session of the pool is out: wait for one to come back
                        delay = retry.delay(time.monotonic())
                        if delay is None:
                            raise retry.final(exc, remedy=POOL_BUSY_REMEDY) from None
                        sleep(delay)
                        continue
                    self._checkout = checkout
                else:
                    server = shared.servers.acquire()
                    if server is None:  # every server is full and no more may start: wait
                        delay = retry.delay(time.monotonic())
                        if delay is None:
                            raise retry.final(refusal, remedy=self._remedy()) from None
                        sleep(delay)
                        continue
                    if server.fresh:  # started for this instance: that wait was ready_timeout's, not
                        server.fresh = False  # capacity_timeout's, and the new server may still be freeing
                        wait.restart(time.monotonic())  # the slot of the client that probed it
                    self._server = server
                    self._env = Env(server.base_url, **shared.options)
            env = self._env
            if env is None:  # close() ended this client mid-reset
                raise EnvClosed(self._closed_message())
            try:
                return env.reset(**kwargs)
            except CapacityReached as exc:
                refusal = exc
                with shared.lock:  # (close() from another thread takes ``_env`` under it)
                    server, self._server = self._server, None
                    if server is not None:
                        env, self._env = self._env, None
                if server is not None:  # try again where the servers' limit now says there is room
                    if env is not None:
                        env.close()
                    if shared.servers.refused(server, exc):
                        continue
                delay = retry.after(exc, time.monotonic())
                if delay is None:
                    raise retry.final(exc, remedy=self._remedy()) from None
                sleep(delay)
            except (ConnectError, SessionLost) as exc:
                reason = self._drop_dead_server(exc)
                if reason is None:
                    raise
                deaths += 1
                if deaths > _MAX_DEATHS:  # every new server dies too: say so rather than start them forever
                    raise ConnectError(
                        f"{deaths} servers of {shared.name} died one after another during this reset; "
                        f"the last: {reason}"
                    ) from exc
                logger.warning("%s: the server of an instance died (%s); starting another", shared.name, reason)

    def _drop_dead_server(self, exc: ConnectError | SessionLost) -> str | None:
        """After a failed connection: why this instance's server died (then the instance lets go of it), else ``None``.

        The class drops and stops the dead server (`ServerSet.dead`), so the
        next ``reset`` gets another within ``max_servers``.  A timeout means a
        slow server, not a dead one (a death drops the connection).
        """
        server = self._server
        if server is None or isinstance(exc, EnvTimeout):
            return None
        shared = self._openenv
        reason = shared.servers.dead(server)
        if reason is None:
            return None
        with shared.lock:
            env, self._env, self._server = self._env, None, None
        shared.servers.release(server)
        if env is not None:
            env.close()
        return reason

    def _remedy(self) -> str:
        servers = self._openenv.servers
        return instances_remedy(servers.cap if servers.grows else None)

    def _call_tool(self, spec: core.MethodSpec, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        shared = self._openenv
        self._last_reward = self._last_error = None
        try:
            arguments = core.bind_arguments(spec, args, kwargs)
        except TypeError as exc:
            self._last_error = str(exc)
            if shared.raise_tool_errors:
                raise
            return f"Error: {exc}"
        env = self._env
        if env is None:
            shared.check_open()
            if self._lost is not None:  # a tool call after the one that found its server dead: say so again
                raise SessionLost(self._lost)
            raise RuntimeError(f"call reset() on this {type(self).__name__} before its tools")
        if self.done:
            return core.EPISODE_OVER
        render = shared.render
        try:
            if spec.tool is None:
                result = env.step(arguments)
                self._record(result.reward, result.done)
                return self._render_step(result)
            outcome = env.call_tool(spec.tool, **arguments)
        except ToolError as exc:
            self._record(exc.reward, exc.done)  # a failed call is a step too: its penalty and end count
            self._last_error = str(exc)
            if shared.raise_tool_errors:
                raise
            return f"Error: {exc}"
        except (ServerValidationError, ExecutionError) as exc:
            self._last_error = str(exc)
            if shared.raise_tool_errors:
                raise
            return f"Error: {exc}"
        except (SessionLost, ConnectError) as exc:
            reason = self._drop_dead_server(exc)
            if reason is None:
                raise
            then = (
                "the next reset() starts a new server"
                if shared.servers.grows
                else "this class cannot start another (a provider, or a fixed port): call environment_factory again"
            )
            self._lost = (
                f"the server of this {type(self).__name__} instance died, and its episode with it; {then}. {reason}"
            )
            raise SessionLost(self._lost) from exc
        self._record(outcome.reward, outcome.done)
        if outcome.is_error:
            self._last_error = core.render_tool_result(outcome)
        if outcome.is_error and shared.raise_tool_errors:
            raise ToolError(
                core.render_tool_result(outcome),
                tool=spec.tool,
                data=outcome.content,
                reward=outcome.reward,
                done=outcome.done,
            )
        return (render or core.render_tool_result)(outcome)

    def _record(self, reward: float | None, done: bool) -> None:
        self._last_reward = None if reward is None else float(reward)
        if reward is not None:
            self.reward = self.reward + float(reward) if self._openenv.reward == "sum" else float(reward)
        self.done = self.done or bool(done)

    def _close_session(self) -> None:
        """End this instance's session (``close()``); a reset in progress ends with ``EnvClosed``.

        ``close()`` does not wait for a reset in progress (one waiting for
        capacity can take ``capacity_timeout`` seconds).  It leaves what that
        reset holds to the reset, which gives it back as it ends, so no
        session, pool checkout or server slot is kept after a close; a plain
        client's request is cut short at once (a pool's session is not: the
        pool keeps it open).
        """
        shared = self._openenv
        with shared.lock:  # one taker at a time: close() may come from another thread (sync) or task (aio)
            self._closes += 1
            if self._resetting:
                env = self._env if self._checkout is None else None
                if env is not None:
                    self._env = None
                checkout = server = None
            else:
                env, checkout, server = self._env, self._checkout, self._server
                self._env = self._checkout = self._server = None
        shared.discard(self)
        self._give_back(env, checkout, server)

    def _let_go(self) -> None:
        """Give back what this instance holds: its checkout to the pool, or close its client and free the slot."""
        with self._openenv.lock:
            env, checkout, server = self._env, self._checkout, self._server
            self._env = self._checkout = self._server = None
        self._give_back(env, checkout, server)

    def _give_back(self, env: Env[Any, Any, Any] | None, checkout: Any, server: Server | None) -> None:
        if server is not None:
            self._openenv.servers.release(server)
        if checkout is not None:
            checkout.__exit__(None, None, None)  # back to the pool, which keeps it open
        elif env is not None:
            env.close()

    def _end_reset(self, closes: int) -> bool:
        """The reset ends: whether ``close()`` ran since it began (``closes``); from here on close() gives back."""
        with self._openenv.lock:
            self._resetting = False
            return self._closes != closes

    def _closed_message(self) -> str:
        return f"this {type(self).__name__} was closed during its reset; call reset() again to start a new session"

    def _raise_closed(self, error: Exception | None) -> NoReturn:
        """Raise the error of a reset that ``close()`` ended: the class's own when the class was closed."""
        shared = self._openenv
        shared.discard(self)
        shared.check_open()  # the class was closed: environment_factory(...) again, not reset()
        if isinstance(error, EnvClosed):
            raise error
        raise EnvClosed(self._closed_message()) from error

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close_session()


def _get_reward(self):  # type: ignore[no-untyped-def]  # annotations set below (help() shows them)
    """The episode's reward (``self.reward``); TRL calls it once per finished rollout."""
    return self.reward


_get_reward.__annotations__ = {"return": float}
_get_reward.__name__ = "get_reward"
_get_reward.__qualname__ = "TRLEnvironment.get_reward"


def _make_method(spec: core.MethodSpec, class_name: str) -> Callable[..., Any]:
    """One tool method: a closure with the tool's real signature, annotations and docstring."""

    def method(self: TRLEnvironment, *args: Any, **kwargs: Any) -> str:
        self._check_loop()
        with self._lock:  # a rollout's calls one at a time on its session: never SessionBusy
            return self._call_tool(spec, args, kwargs)

    method.__name__ = spec.name
    method.__qualname__ = f"{class_name}.{spec.name}"
    method.__doc__ = spec.docstring()
    method.__annotations__ = spec.annotations()
    setattr(method, "__signature__", spec.signature())  # noqa: B010 - functions have no declared __signature__
    return method


def _list_tools(env: Env[Any, Any, Any]) -> list[Tool]:
    """The server's MCP tools; ``[]`` when the environment has none."""
    try:
        return env.list_tools()
    except ToolError as exc:
        if mcp.is_unsupported(exc) or exc.code in _NO_TOOLS_CODES:
            return []
        raise


def _probe(env: Env[Any, Any, Any], capacity_timeout: float | None) -> list[Tool]:
    """`_list_tools` on a server URL, retried with backoff while the server is at capacity."""
    retry = CapacityWait(capacity_timeout, time.monotonic()).retry()
    while True:
        try:
            return _list_tools(env)
        except CapacityReached as exc:
            delay = retry.after(exc, time.monotonic())
            if delay is None:
                raise retry.final(exc, remedy=TOOLS_REMEDY, doing=" to read the environment's tools") from None
            sleep(delay)


def _class_name(name: str | None, metadata: Any) -> str:
    if name:
        if not name.isidentifier():
            raise ValueError(f"name must be a Python identifier, not {name!r}")
        return name
    found = metadata.get("name") if isinstance(metadata, dict) else None
    if isinstance(found, str) and found.strip():
        ident = core.python_name("".join(part[:1].upper() + part[1:] for part in found.replace("-", "_").split("_")))
        return ident.lstrip("_") or "OpenEnvEnvironment"
    return "OpenEnvEnvironment"


def environment_factory(
    target: str | Provider | EnvPool[Any, Any, Any],
    *,
    reward: str = "sum",
    render: Callable[[Any], str] | None = None,
    raise_tool_errors: bool = False,
    name: str | None = None,
    reset_keys: Collection[str] | str | None = None,
    capacity_timeout: float | None = 120.0,
    get_reward: bool = True,
    use_docker: bool = True,
    tag: str = "latest",
    registry: str | None = None,
    env_vars: Mapping[str, str] | None = None,
    port: int | None = None,
    command: Sequence[str] | None = None,
    ready_timeout: float | None = 60.0,
    max_servers: int | None = DEFAULT_MAX_SERVERS,
    provider: Any = None,
    **options: Unpack[EnvOptions],
) -> type[TRLEnvironment]:
    """A TRL environment class for an OpenEnv environment, generated from its tools and schema.

    Pass the class to ``GRPOTrainer(environment_factory=...)``.  It follows
    TRL's contract: ``cls()`` takes no arguments; ``reset(**row)`` starts an
    episode and returns the first observation as text; every public method is
    a tool for the model: one per MCP tool of the environment, with the tool's
    parameters as a real signature (types, defaults, ``Literal`` enums,
    ``X | None``) and a Google-style docstring (its description, one ``Args:``
    line per parameter, ``Returns:``), so ``transformers.utils.get_json_schema``
    gives back the schema the server declares.  An environment without MCP
    tools gets one ``step`` method instead, with one parameter per field of its
    action (from ``GET /schema``; ``metadata`` left out).  ``reward`` and
    ``done`` hold the episode's reward and end; ``get_reward()`` returns the
    reward (TRL then uses the environment as a reward source: do not also pass
    a reward function that reads ``env.reward``).

    A tool call goes through ``Env.call_tool`` (``step`` for the ``step``
    method) and returns the text the model should see; a tool error becomes
    ``"Error: ..."`` text unless ``raise_tool_errors``.  A failed call is a
    step all the same (simulation mode): its reward (a penalty, say) is added
    to ``reward`` and its ``done`` ends the episode, whether the error is
    returned as text or raised.  Once the environment reports ``done``, tools
    answer that the episode is over without reaching the server.

    Sessions: this call starts (or attaches to) one server, lists its tools
    and reads its schema (the methods must exist before TRL looks at the
    class); the servers live until ``cls.close()`` or interpreter exit.  Each
    instance opens its own session on its first ``reset`` and ends it on
    ``instance.close()``, ``cls.close()`` or exit.  TRL makes one instance per
    rollout of the generation batch, so a run needs that many sessions at once
    (TRL's probe instance opens no session until it is reset, and TRL 1.16
    reuses it as a rollout's).  When the target is a Docker image, a Space's
    image or a checkout and its server refuses a session (``CAPACITY_REACHED``,
    which says how many it holds: most of OpenEnv's servers hold one), the
    class starts another server of it, and another, up to ``max_servers``;
    beyond that, and for a URL, an instance waits with backoff up to
    ``capacity_timeout`` for a session to end (or raise the server's session
    limit to at least the generation batch size: ``python -m openenv serve ...
    --max-sessions N``, or ``MAX_CONCURRENT_ENVS`` for OpenEnv's servers).

    With an [`EnvPool`][openenv.sync.EnvPool] as ``target``, no server is
    started and no session opened: each instance checks a session out of the
    pool on its first ``reset`` (waiting up to ``capacity_timeout`` while all
    are out) and checks it back in on ``instance.close()`` or ``cls.close()``.
    The pool stays open (close it yourself); its servers, options and codec
    are the ones used, and the connection options given here are ignored
    (a misspelt name is still refused).

    Args:
        target: what ``Env.from_env`` accepts (a server URL, a Docker image or
            Space id, an environment checkout directory), a provider, or an
            [`EnvPool`][openenv.sync.EnvPool] to check sessions out of.
        reward: ``"sum"`` (default) adds up the step rewards; ``"last"`` keeps
            the last one, for environments that report a cumulative score.
        render: turns what the model sees into text: called with the reset
            observation, the ``step`` observation, or the
            [`ToolResult`][openenv.sync.ToolResult] of an MCP tool.  Default:
            every word of the observation (its text fields, the contents of
            a list of messages, its other strings as ``name: value``, compact
            JSON when it has no text, its metadata's words when nothing else
            carries any; the rule is in the TRL guide) and a tool's text output.
            The reset text gets a leading blank line either way.
        raise_tool_errors: raise tool errors (and refused actions) instead of
            returning them as text for the model.
        name: the class name (default: from ``GET /metadata``).
        reset_keys: the dataset columns ``reset`` forwards (``"all"``: every
            one); default: what the server declares, else ``seed`` and ``episode_id``.
        capacity_timeout: seconds an instance's first ``reset`` keeps retrying
            while the server is at capacity (``None``: no limit); for a server
            URL, reading its tools here waits as long.  Starting
            one more server (``max_servers``) is bounded by ``ready_timeout``
            and the wait starts again once it is up.
        get_reward: define ``get_reward()`` (TRL's reward hook).
        use_docker: as for ``Env.from_env``.
        tag: as for ``Env.from_env``.
        registry: as for ``Env.from_env``.
        env_vars: as for ``Env.from_env``.
        port: as for ``Env.from_env``.
        command: as for ``Env.from_env``.
        ready_timeout: as for ``Env.from_env``.
        max_servers: the most servers the class runs for a Docker image or a
            checkout whose servers are full (default 8; ``None``: no cap).  Not
            used for a URL, a provider or a pool, nor with ``port``.
        provider: a provider for ``target`` (a string), as ``Env.from_env(target,
            provider=...)`` takes it: an OpenEnv provider object unchanged
            (``LocalDockerProvider()`` with an image as ``target``, a cloud
            sandbox's provider), or one of ours.  It serves one server.
        **options: the connection options of ``Env(...)``, used by every
            instance and by the schema and metadata requests made here:
            ``verify=`` (a CA bundle for a private CA), ``headers=``, timeouts.

    Returns:
        The generated class, a subclass of `TRLEnvironment`.

    Raises:
        ValueError: an option has a wrong value.
        ConnectError: the server could not be reached, or its certificate
            failed verification (pass ``verify=`` a CA bundle for a private CA).
        ProtocolError: ``GET /schema`` or ``GET /metadata`` answered an error
            (a 404 only means the server does not publish it).
        ProviderError: the server could not be started.
    """
    check_options(options, "environment_factory")  # before any server starts
    given = dict(options)  # as the caller gave them: a pickled class's recipe (headers for a Space are derived again)
    if reward not in ("sum", "last"):
        raise ValueError(f"reward must be 'sum' or 'last', not {reward!r}")
    if capacity_timeout is not None and capacity_timeout < 0:
        raise ValueError(f"capacity_timeout must be >= 0 seconds or None, not {capacity_timeout!r}")
    max_servers = check_max_servers(max_servers)
    keys: frozenset[str] | None | bool = False
    if isinstance(reset_keys, str):
        if reset_keys != "all":
            raise ValueError(f"reset_keys must be 'all' or a collection of names, not {reset_keys!r}")
        keys = None
    elif reset_keys is not None:
        keys = frozenset(reset_keys)
    root: Env[Any, Any, Any] | None = None
    pool: EnvPool[Any, Any, Any] | None = None
    start: Callable[[], Any] | None = None  # starts one more server of the target
    if isinstance(target, EnvPool):
        pool = target
        pool.connect()
        if not len(pool):
            raise ValueError("environment_factory needs a pool of at least one session")
        probe = pool.envs[0]
    elif isinstance(target, str) and provider is not None:  # one server, by the provider given
        root = probe = Env.from_env(
            target, provider=provider, env_vars=env_vars, port=port, ready_timeout=ready_timeout, **options
        )
    elif isinstance(target, str):
        where = where_is(target, use_docker=use_docker, tag=tag, registry=registry)
        if where.kind == "url":
            options["headers"] = hosted_headers(where.target, options.get("headers"))
            probe = Env(where.target, **options)
        else:
            source = target

            def start_one() -> Env[Any, Any, Any]:
                return Env.from_env(
                    source,
                    use_docker=use_docker,
                    tag=tag,
                    registry=registry,
                    env_vars=env_vars,
                    port=port,
                    command=command,
                    ready_timeout=ready_timeout,
                    **options,
                )

            root = probe = start_one()
            start = start_one if port is None else None  # one fixed port holds one server
    else:
        root = probe = Env.from_provider(target, ready_timeout=ready_timeout, **options)
    try:
        base_url = probe.base_url
        headers = dict(probe.options.headers)
        # a URL's server may be full for now (another run's instances): wait as an instance's reset does
        tools = (_list_tools(probe) if root is not None or pool is not None else _probe(probe, capacity_timeout))
        # the probe's options (verify, headers, timeouts); a failure raises, a 404 means "not published"
        schema = get_json(base_url, "/schema", probe.options, optional=True)
        metadata = get_json(base_url, "/metadata", probe.options, optional=True)
        if pool is not None:
            pass  # the pool's session stays: an instance checks it out
        elif root is None:
            probe.close()
        else:
            root.disconnect()  # keep the server, free the session slot for the instances
    except BaseException:
        if pool is None:
            probe.close()
        raise
    class_name = _class_name(name, metadata)
    if tools:
        specs, notes = core.plan_methods(tools)
        for note in notes:
            (logger.warning if note.startswith("skipped") else logger.info)("%s: %s", class_name, note)
    else:
        action = schema.get("action") if isinstance(schema, dict) else None
        if not isinstance(action, dict):
            logger.warning(
                "%s: the server has no MCP tools and no action schema; step() takes no arguments", class_name
            )
        specs = [core.step_spec(action)]
    shared = _Shared(
        name=class_name,
        base_url=base_url,
        servers=ServerSet(Server(base_url, root), start=start, max_servers=max_servers),
        options={**options, "headers": headers},
        reset_keys=core.reset_parameters(schema, metadata) if keys is False else keys,  # type: ignore[arg-type]
        reward=reward,
        render=render,
        raise_tool_errors=raise_tool_errors,
        capacity_timeout=capacity_timeout,
        pool=pool,
    )
    listing = ", ".join(spec.name for spec in specs)
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": class_name,
        "__doc__": (
            f"The OpenEnv environment at {redact_url(base_url)} as a TRL environment (tools: {listing}).\n\n"
            f"Generated by environment_factory; see {TRLEnvironment.__name__} for reset, reward, done and close."
        ),
        "_openenv": shared,
        "tools": tuple(tools),
        "base_url": base_url,
    }
    if get_reward:
        namespace["get_reward"] = _get_reward
    for spec in specs:
        namespace[spec.name] = _make_method(spec, class_name)
    cls = type(class_name, (TRLEnvironment,), namespace)
    action = schema.get("action") if isinstance(schema, dict) else None
    shared.recipe = _Recipe(
        name=class_name,
        # a provider's server, or one on a fixed port, is reached where it is; any other target is derived again
        target=target if isinstance(target, str) and provider is None and (root is None or port is None) else base_url,
        hidden=hidden_label(base_url),  # a provider's capability URL stays hidden where the class is unpickled
        from_pool=pool is not None,
        start_kwargs={
            "use_docker": use_docker,
            "tag": tag,
            "registry": registry,
            "env_vars": dict(env_vars) if env_vars is not None else None,
            "command": list(command) if command is not None else None,
            "ready_timeout": ready_timeout,
        },
        max_servers=max_servers,
        options=given,
        tools=tuple(tools),
        action=action if isinstance(action, dict) else None,
        reset_keys=shared.reset_keys,
        reward=reward,
        render=render,
        raise_tool_errors=raise_tool_errors,
        capacity_timeout=capacity_timeout,
        get_reward=get_reward,
    )
    _remember(cls)
    return cls


# ------------------------------------------------------------------ pickling: a class travels as its recipe
#
# TRL's AsyncGRPOTrainer pickles environment_factory into a child process started with ``spawn``.  A
# generated class pickles as the recipe it was made from (`_Recipe`: the target, the options, the facts
# its server gave: tools, action schema, reset keywords), never as its servers or sessions.  Unpickled in
# another process, it is rebuilt without any IO (`_rebuild`), and its first ``reset`` there reaches the
# server as the original would have: a URL (and a provider's server, or one on a fixed ``port``) is
# connected to where it is; a Docker image, a Space's image or a checkout gets servers of its own,
# started in that process and stopped when its class closes or the process exits (the reaper removes them
# after a SIGKILL).  The parent's servers stay the parent's.  Unpickled in the process that made it, it
# is the same class.


@dataclass(frozen=True, eq=False)
class _Recipe:
    """What it takes to build a generated class again in another process (pickled with it)."""

    name: str
    target: str
    from_pool: bool
    start_kwargs: dict[str, Any]
    max_servers: int | None
    options: dict[str, Any]
    tools: tuple[Tool, ...]
    action: dict[str, Any] | None
    reset_keys: frozenset[str] | None
    reward: str
    render: Callable[[Any], str] | None
    raise_tool_errors: bool
    capacity_timeout: float | None
    get_reward: bool
    hidden: str | None = None  # the label `hide_url` gave the target URL in the process that made the class
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    origin_pid: int = field(default_factory=os.getpid)

    def __repr__(self) -> str:  # its options, env_vars and target may carry secrets (headers, tokens)
        return f"<_Recipe {self.name} of {redact_url(self.target)} from process {self.origin_pid}>"


#: the generated classes of this process, by recipe token: unpickling one here gives the class itself
_CLASSES: weakref.WeakValueDictionary[str, type[TRLEnvironment]] = weakref.WeakValueDictionary()


def _remember(cls: type[TRLEnvironment]) -> None:
    recipe = cls._openenv.recipe
    if recipe is not None:
        _CLASSES[recipe.token] = cls


def _reduce_class(cls: type) -> Any:
    """``copyreg`` reducer of `_ToolsMeta`: a generated class pickles as ``_rebuild(recipe)``."""
    shared = cls.__dict__.get("_openenv")
    if not isinstance(shared, _Shared) or shared.recipe is None:
        return cls.__qualname__  # TRLEnvironment itself, or a subclass defined in a module: by reference
    recipe = shared.recipe
    if recipe.from_pool:
        raise TypeError(core.pool_pickle_message(cls.__name__))
    if recipe.render is not None:
        import pickle

        try:
            pickle.dumps(recipe.render)
        except Exception as exc:
            raise TypeError(core.render_pickle_message(cls.__name__, recipe.render, exc)) from exc
    return _rebuild, (recipe,)


copyreg.pickle(_ToolsMeta, _reduce_class)


def _rebuild(recipe: _Recipe) -> type[TRLEnvironment]:
    """The class ``recipe`` describes, in this process (no IO: servers start or connect on the first ``reset``)."""
    known = _CLASSES.get(recipe.token)
    if known is not None and known._openenv.pid == os.getpid():
        return known  # made or already unpickled in this process
    options: dict[str, Any] = dict(recipe.options)
    kw = recipe.start_kwargs
    where = classify_source(recipe.target, use_docker=kw["use_docker"], tag=kw["tag"], registry=kw["registry"])
    if where.kind == "url":
        base_url = where.target
        if recipe.hidden is not None:
            hide_url(base_url, recipe.hidden)
        options["headers"] = hosted_headers(base_url, options.get("headers"))
        servers = ServerSet(Server(base_url, None))
    else:
        base_url = ""  # known once this process has started a server of it
        servers = ServerSet(None, start=_starter(recipe.target, kw, options), max_servers=recipe.max_servers)
    shared = _Shared(
        name=recipe.name,
        base_url=base_url,
        servers=servers,
        options=options,
        reset_keys=recipe.reset_keys,
        reward=recipe.reward,
        render=recipe.render,
        raise_tool_errors=recipe.raise_tool_errors,
        capacity_timeout=recipe.capacity_timeout,
    )
    shared.recipe = recipe
    tools = list(recipe.tools)
    specs = core.plan_methods(tools)[0] if tools else [core.step_spec(recipe.action)]
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": recipe.name,
        "__doc__": (
            f"The OpenEnv environment {redact_url(recipe.target)} as a TRL environment (tools: "
            f"{', '.join(spec.name for spec in specs)}), unpickled in process {os.getpid()}.\n\n"
            f"Generated by environment_factory; see {TRLEnvironment.__name__} for reset, reward, done and close."
        ),
        "_openenv": shared,
        "tools": tuple(tools),
        "base_url": base_url,
    }
    if recipe.get_reward:
        namespace["get_reward"] = _get_reward
    for spec in specs:
        namespace[spec.name] = _make_method(spec, recipe.name)
    cls: type[TRLEnvironment] = type(recipe.name, (TRLEnvironment,), namespace)
    _remember(cls)
    return cls


def _starter(source: str, kw: Mapping[str, Any], options: Mapping[str, Any]) -> Callable[[], Any]:
    """Starts one server of ``source`` (a Docker image, a Space's image, a checkout) in this process."""

    def start_one() -> Env[Any, Any, Any]:
        return Env.from_env(
            source,
            use_docker=kw["use_docker"],
            tag=kw["tag"],
            registry=kw["registry"],
            env_vars=kw["env_vars"],
            command=kw["command"],
            ready_timeout=kw["ready_timeout"],
            **options,
        )

    return start_one
