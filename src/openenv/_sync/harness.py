# GENERATED from src/openenv/_async/harness.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Any OpenEnv environment as OpenEnv's harness sessions: ``harness_factory(target)``.

OpenEnv 0.10's trainer-side rollout API (``openenv.core.harness``) drives a
whole episode through a ``ResourceSessionFactory``: ``create(task, seed,
episode_id)`` gives a ``ResourceSession`` with ``initial_messages``,
``list_tools``, ``call_tool``, ``verify`` and ``close``, which a harness such
as ``MCPHarnessAdapter.run_white_box`` (or TRL's ``HarnessRolloutWorker``)
calls.  `harness_factory()` builds that factory from any target
``environment_factory`` takes; each session is one instance of the class
``environment_factory`` generates, so it keeps that class's rules (rewards,
the environment's words, tool errors as text, capacity, more servers for
one-session servers).

OpenEnv's protocol is synchronous: its harnesses call the session's methods
from plain code (TRL: from a pool thread per rollout).  The ``openenv.sync``
factory is that protocol.  The ``openenv.aio`` factory has the same methods as
coroutines, for rollouts written on an event loop; called from another thread
while its loop runs (a harness run in a worker thread), each one runs
on that loop and returns its result, so a synchronous harness drives it with
no thread per session.  OpenEnv itself is imported only when `harness_factory`
is called.
"""

from __future__ import annotations

import importlib
from types import TracebackType
from typing import Any

from typing_extensions import Self

from .._core import harness as core
from .._core import trl as trl_core
from .._core.errors import EnvClosed
from .._shim_sync import callable_from_threads, current_loop
from .pool import EnvPool
from .providers import Provider
from .trl import TRLEnvironment, environment_factory

__all__ = ["harness_factory", "HarnessSessionFactory", "HarnessSession"]

_NO_LOOP = (
    "this is the openenv.aio harness factory: call its methods on the event loop it was made on, or "
    "call them "
    "from another thread while that loop runs. No event loop runs here: for a synchronous harness driven from "
    "plain code, use openenv.sync.harness_factory(...)"
)


def _harness_module() -> Any:
    """OpenEnv's ``openenv.core.harness`` (imported here, on first use only)."""
    try:
        return importlib.import_module("openenv.core.harness")
    except ImportError as exc:
        raise ImportError(core.NEEDS_OPENENV) from exc


class HarnessSession:
    """One rollout: an instance of the generated class behind OpenEnv's ``ResourceSession`` methods.

    Made by `HarnessSessionFactory.create`, already reset.  A virtual subclass
    of OpenEnv's ``ResourceSession`` (``isinstance`` says so).

    Attributes:
        environment: the generated class's instance (its ``reward``, ``done``, ``env``).
    """

    def __init__(self, factory: HarnessSessionFactory, environment: TRLEnvironment, messages: list[dict[str, Any]]):
        self.environment = environment
        self._factory = factory
        self._messages = messages
        self._loop = factory._loop
        self._closed = False
        self._calls = 0
        self._errors = 0

    def __repr__(self) -> str:
        return f"<HarnessSession {self.environment!r}{' closed' if self._closed else ''}>"

    def initial_messages(self) -> list[dict[str, Any]]:
        """The task's prompt with the reset's text appended to its last user message (or as one of its own)."""
        return [dict(m) for m in self._messages]

    def list_tools(self) -> list[Any]:
        """OpenEnv ``Tool`` objects: the server's MCP tools, or one ``action`` tool built from the action schema."""
        tool = self._factory._tool_class
        return [tool(name=e.name, description=e.description, input_schema=e.input_schema) for e in self._factory._tools]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """One tool call (a step for the ``action`` tool), as an OpenEnv ``ToolResult``.

        ``data`` is the text the model sees (the class's rendering; a tool
        error is ``"Error: ..."`` text and also in ``error``); ``done`` is the
        episode's end; ``metadata`` holds ``reward`` (the episode's reward so
        far, as `verify` reports it), ``step_reward`` (this call's own, or
        ``None``) and ``done``.

        Raises:
            KeyError: the session lists no tool of that name (OpenEnv's convention).
            EnvClosed: the session was closed.
        """
        entry = self._factory._by_name.get(name)
        if entry is None:
            raise KeyError(core.unknown_tool_message(name, list(self._factory._by_name)))
        if self._closed:
            self._factory._cls._openenv.check_open()
            raise EnvClosed("this harness session was closed; create() another")
        spec = self._factory._specs[entry.method]
        names = {p.wire: p.name for p in spec.params}
        kwargs = {names.get(key, key): value for key, value in arguments.items()}
        env = self.environment
        env._check_loop()
        with env._lock:
            text = env._call_tool(spec, (), kwargs)
        self._calls += 1
        error = env._last_error
        if error is not None:
            self._errors += 1
        result_type = self._factory._result_class
        metadata = core.tool_metadata(env.reward, env._last_reward, env.done)
        return result_type(data=text, done=env.done, metadata=metadata, error=error)

    def verify(self, transcript: list[dict[str, Any]], final_state: Any = None) -> Any:
        """OpenEnv's ``VerifyResult``: ``env_reward`` is the episode's reward, ``done``: its end.

        ``metrics`` counts this session's tool calls and failed ones.
        """
        verdict = self._factory._verify_class
        metrics = {"tool_calls": self._calls, "tool_errors": self._errors}
        env = self.environment
        return verdict(env_reward=env.reward, done=env.done, metrics=metrics, artifacts={"turns": len(transcript)})

    def close(self) -> None:
        """End the session (its server slot is freed at once); idempotent.

        From another thread, it also ends a call in flight, which raises
        ``SessionLost`` (TRL's harness worker closes its live sessions so when it stops).
        """
        self._closed = True
        self.environment._close_session()

    call_tool = callable_from_threads(call_tool, _NO_LOOP)
    close = callable_from_threads(close, _NO_LOOP)


class HarnessSessionFactory:
    """OpenEnv's ``ResourceSessionFactory`` over a class ``environment_factory`` generated (`harness_factory`).

    A virtual subclass of OpenEnv's ``ResourceSessionFactory``.  It pickles as
    its class does (by recipe: a spawned process starts or reaches its own
    servers), and calling it returns itself, so it can be passed where a
    callable returning a factory is wanted (TRL's ``harness_session_factory``).

    Attributes:
        environment_class: the generated class (one instance per session).
    """

    def __init__(self, environment_class: type[TRLEnvironment]) -> None:
        harness = _harness_module()
        mcp_types = importlib.import_module("openenv.core.env_server.mcp_types")
        harness.ResourceSessionFactory.register(HarnessSessionFactory)
        harness.ResourceSession.register(HarnessSession)
        self.environment_class = environment_class
        self._cls = environment_class
        self._tool_class = mcp_types.Tool
        self._result_class = harness.ToolResult
        self._verify_class = harness.VerifyResult
        recipe = environment_class._openenv.recipe
        tools = list(recipe.tools) if recipe is not None else list(environment_class.tools)
        action = recipe.action if recipe is not None else None
        methods = trl_core.plan_methods(tools)[0] if tools else [trl_core.step_spec(action)]
        self._specs = {spec.name: spec for spec in methods}
        self._tools = core.manifest(tools, methods, action)
        self._by_name = {entry.name: entry for entry in self._tools}
        self._loop = current_loop()

    def __repr__(self) -> str:
        return f"<HarnessSessionFactory {self._cls.__name__} tools={list(self._by_name)}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (HarnessSessionFactory, (self._cls,))

    def __call__(self) -> Self:
        return self

    def create(self, task: Any = None, seed: int | None = None, episode_id: str | None = None) -> HarnessSession:
        """A new session, reset: ``task`` (a dataset row, a prompt or a list of messages) gives its reset keywords.

        A mapping's keys, ``seed`` and ``episode_id`` go to the environment's
        ``reset`` (only those it takes, as the generated class forwards them);
        the task's prompt and the reset's text become `initial_messages`.
        Each session holds its own server session until `HarnessSession.close`.

        Raises:
            CapacityReached: every server stayed full for ``capacity_timeout`` seconds.
            EnvClosed: the factory was closed.
        """
        env = self._cls()
        try:
            text = env.reset(**core.reset_kwargs(task, seed, episode_id))
        except BaseException:
            env._close_session()
            raise
        return HarnessSession(self, env, core.initial_messages(task, text))

    def close(self) -> None:
        """End every session and stop every server the factory started (the class's ``close``); idempotent."""
        self._cls._openenv.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    create = callable_from_threads(create, _NO_LOOP)
    close = callable_from_threads(close, _NO_LOOP)


def harness_factory(target: str | Provider | EnvPool[Any, Any, Any], **kwargs: Any) -> HarnessSessionFactory:
    """OpenEnv's ``ResourceSessionFactory`` (``openenv.core.harness``, OpenEnv 0.10) for an OpenEnv environment.

    Takes what `environment_factory` takes (a server URL, a Docker image or
    Space id, a checkout, a provider or an [`EnvPool`][openenv.sync.EnvPool],
    and its keyword options: ``reward``, ``render``, ``capacity_timeout``,
    ``max_servers``, connection options, ...) and starts or reaches the server
    the same way.  Each ``create(task, seed, episode_id)`` is one instance of
    the generated class, reset; its session's:

    * ``initial_messages()``: the task's prompt with the reset's rendered text;
    * ``list_tools()``: the server's MCP tools, or one ``action`` tool whose
      arguments are the action's fields (``step`` is reserved by OpenEnv);
    * ``call_tool(name, arguments)``: a step, carrying the text the model
      sees, ``done``, and the reward (``metadata["reward"]``: the episode's so
      far; ``metadata["step_reward"]``: this call's), a tool error as text
      and in ``error``;
    * ``verify(transcript)``: ``env_reward`` is the episode's reward;
    * ``close()``: ends the session.

    ``factory.close()`` (or the ``with`` block) stops what it started.

    Args:
        target: what `environment_factory` takes.
        **kwargs: `environment_factory`'s options.

    Returns:
        The factory (a virtual subclass of OpenEnv's ``ResourceSessionFactory``).

    Raises:
        ImportError: OpenEnv 0.10 (``openenv.core.harness``) is not installed beside this package.
        ValueError, ConnectError, ProtocolError, ProviderError: as `environment_factory`.
    """
    _harness_module()  # before any server starts
    cls = environment_factory(target, **kwargs)
    try:
        return HarnessSessionFactory(cls)
    except BaseException:
        cls._openenv.close()
        raise
