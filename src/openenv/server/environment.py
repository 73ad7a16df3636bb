"""The base class of environments served by [`openenv.server`][openenv.server].

An environment is a plain Python object with ``reset``, ``step``, a ``state``
property and ``close``; [`EnvServer`][openenv.server.EnvServer] creates one instance
per WebSocket session and drives it from that session's thread.

**Example**

```python
from openenv.server import Action, Environment, Observation, State

class CounterAction(Action):
    delta: int

class CounterObservation(Observation):
    count: int = 0

class CounterEnv(Environment[CounterAction, CounterObservation, State]):
    action_type = CounterAction
    observation_type = CounterObservation

    def __init__(self) -> None:
        self._state = State()
        self._count = 0

    def reset(self, seed=None, episode_id=None):
        self._state = State(episode_id=episode_id)
        self._count = 0
        return CounterObservation(count=0)

    def step(self, action):
        self._count += action.delta
        self._state.step_count += 1
        return CounterObservation(count=self._count, reward=float(action.delta))

    @property
    def state(self):
        return self._state
```
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from openenv._core.models import Action, Observation, State

if TYPE_CHECKING:
    from .tools import CallToolAction, ListToolsAction

__all__ = ["Environment", "ActT", "ObsT", "StateT", "filter_kwargs"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class Environment(ABC, Generic[ActT, ObsT, StateT]):
    """Base class of an environment served over the OpenEnv protocol.

    Subclasses implement [`reset()`][openenv.server.Environment.reset],
    [`step()`][openenv.server.Environment.step] and the [`state`][openenv.server.Environment.state]
    property, and declare their pydantic models in the class attributes below
    (they feed ``GET /schema``, action validation and ``GET /state``).

    Attributes:
        action_type: the action model; every ``step`` frame's ``data`` is
            validated with it before [`step()`][openenv.server.Environment.step] is called.
        observation_type: the observation model (``/schema`` → ``observation``).
        reset_observation_type: the observation model returned by
            [`reset()`][openenv.server.Environment.reset] (``/schema`` → ``reset_observation``); ``None`` means
            the same as ``observation_type``.
        state_type: the state model (``/schema`` → ``state``; ``GET /state``
            keeps only its fields).
        SUPPORTS_CONCURRENT_SESSIONS: whether several instances may live in
            one process at the same time. A server refuses ``max_sessions > 1``
            for a class that sets it to ``False``.
        version: the environment's version, reported by ``GET /metadata``
            (``None``: the version of the installed ``openenv-twin``).
        blocking: whether ``reset``/``step`` may block (sleep, wait on a
            socket or a subprocess, compute for more than about a millisecond).
            ``True`` (the default): the server gives each session a worker
            thread, so a slow step stalls only its own session. Set it to
            ``False`` for an environment whose calls return quickly: they then
            run on the server's event loop, without a thread hop per call.
            ``async def reset``/``step`` (or OpenEnv's ``reset_async``/
            ``step_async`` of the class's own: openenv-core's base defaults
            do not count) always run on the loop, awaited; a plain method
            beside them runs on the session's worker thread unless this is
            ``False``.
    """

    action_type: ClassVar[type[Action]] = Action
    observation_type: ClassVar[type[Observation]] = Observation
    reset_observation_type: ClassVar[type[Observation] | None] = None
    state_type: ClassVar[type[State]] = State
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    version: ClassVar[str | None] = None
    blocking: ClassVar[bool] = True

    @abstractmethod
    def reset(self, *args: Any, **kwargs: Any) -> ObsT:
        """Start a new episode and return its first observation.

        Subclasses declare the keywords they take; the conventional signature
        is ``reset(self, seed=None, episode_id=None, **kwargs)``, but any set
        of named parameters works (the base signature is deliberately open so
        that type checkers accept every override).

        The server passes a ``reset`` frame's keys as keyword arguments, but
        only those this method's signature accepts (a named parameter, or any
        key when it takes ``**kwargs``); other keys are dropped silently, as
        the protocol requires. No validation is applied to ``seed`` or
        ``episode_id`` on ``/ws``.
        """

    @abstractmethod
    def step(self, action: ActT) -> ObsT:
        """Apply ``action`` (already validated with `action_type`) and return the observation.

        Set ``done``, ``reward`` and ``metadata`` on the returned observation;
        the server lifts ``done`` and ``reward`` to the top level of the step
        result. An exception raised here is sent to the client as an
        ``EXECUTION_ERROR`` frame with ``str(exception)`` as its message, and
        the session continues.
        """

    @property
    @abstractmethod
    def state(self) -> StateT:
        """The current state of the environment (episode id, step count, ...)."""

    def step_tool(self, action: ListToolsAction | CallToolAction) -> Observation:
        """Apply an MCP action that came through the step loop, and return its observation.

        The server calls this instead of [`step()`][openenv.server.Environment.step] for the actions
        ``{"type": "list_tools"}`` and ``{"type": "call_tool", ...}`` when the
        environment has [`tool()`][openenv.server.tool] methods (and its action
        model no ``type`` field).  That is how clients in simulation mode
        call tools: each call is a real step, and this is where the
        environment counts it and scores it.  The default runs the tool
        (`openenv.server.tools.run_tool_action()`) and returns a
        `CallToolObservation` (``result`` or
        ``error``) or a `ListToolsObservation`,
        with ``reward`` ``None`` and ``done`` ``False``, leaving the state
        alone.  Override it to score calls:

        ```python
        def step_tool(self, action):
            observation = super().step_tool(action)
            if action.type == "call_tool":
                self._state.step_count += 1
                observation.reward = 1.0 if observation.error is None else -1.0
                observation.done = self._state.step_count >= 10
            return observation
        ```

        An exception raised here is sent as an ``EXECUTION_ERROR`` frame,
        as for [`step()`][openenv.server.Environment.step].

        Args:
            action: the step-loop action (validated loosely: a missing
                ``tool_name`` becomes an ``invalid_args`` error in the observation).

        Returns:
            The step's observation; its ``reward`` and ``done`` become the step result's.
        """
        from .tools import run_tool_action

        return run_tool_action(self, action)

    def close(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release the environment's resources.

        Called once when its session ends (``close`` frame, disconnect, fatal
        error or server stop), and after the stateless HTTP ``/state`` call.
        The default does nothing.
        """


@functools.lru_cache(maxsize=256)
def _accepted_names(func: Callable[..., Any], bound: bool) -> tuple[bool, frozenset[str]]:
    """(takes ``**kwargs``, names of keyword-capable parameters) of ``func``.

    ``bound``: ``func`` is the function of a bound method; its first parameter
    (``self``) is not a keyword the caller may pass.
    """
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # no introspectable signature: pass everything
        return True, frozenset()
    params = list(sig.parameters.values())
    if bound and params and params[0].kind is not inspect.Parameter.VAR_POSITIONAL:
        params = params[1:]
    var_kw = False
    names = set()
    for param in params:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            var_kw = True
        elif param.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            names.add(param.name)
    return var_kw, frozenset(names)


def filter_kwargs(method: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Keep the items of ``kwargs`` that ``method`` accepts as keyword arguments.

    Every key is kept when ``method`` takes ``**kwargs``; otherwise only the
    names of its keyword-capable parameters are (never a bound method's
    ``self``). Signatures are cached per function.

    Args:
        method: usually a bound ``env.reset``.
        kwargs: the keys sent by the client.

    Returns:
        A new dict with the accepted items.
    """
    func = getattr(method, "__func__", None)
    bound = func is not None
    target = func if bound else method
    try:
        var_kw, names = _accepted_names(target, bound)
    except TypeError:  # unhashable callable object
        var_kw, names = _accepted_names.__wrapped__(target, bound)
    if var_kw:
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in names}
