"""The served environment factory, without I/O: making instances, and what the ``GET`` routes say of it.

`ServedEnv` holds the factory: it makes instances (`ServedEnv.create_env()`,
`ServedEnv.with_fresh_env()`) and answers what the ``GET`` routes ask of the
environment (``/metadata``, ``/schema``, ``/state``) and whether answering may
block (`ServedEnv.get_may_block()`).  The route answers themselves, as
`HttpReply` values, are `openenv.server._http`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from openenv._core.models import Action, Observation, State

from ._session import close_quietly, opens_on_loop
from .environment import Environment

__all__ = ["ServedEnv", "EnvFactory"]

logger = logging.getLogger("openenv.server")

T = TypeVar("T")

#: An [`Environment`][openenv.server.Environment] subclass, or any zero-argument callable returning an environment.
EnvFactory = type[Environment[Any, Any, Any]] | Callable[[], Environment[Any, Any, Any]]


class ServedEnv:
    """One environment factory: its instances and its description.

    Args:
        factory: an environment class or a zero-argument callable (checked by the caller).
        name: the name ``GET /metadata`` reports (default: the class name).
    """

    def __init__(self, factory: EnvFactory, name: str | None = None) -> None:
        self.factory: Callable[[], Any] = factory
        self.factory_name: str = getattr(factory, "__name__", None) or str(factory)
        #: the environment class, when known without making an instance (the factory is a class, or
        #: `env_class()` made one)
        self.known_class: type | None = factory if isinstance(factory, type) else None
        self._name = name
        self._schema: dict[str, Any] | None = None

    def opens_on_loop(self) -> bool:
        """Whether a session may be opened on an event loop: the class is known and `opens_on_loop()` says so.

        A transport on a loop opens every other session (whose factory may
        block, or whose class is known only from an instance) on a thread.
        """
        cls = self.known_class
        return cls is not None and opens_on_loop(cls)

    # ------------------------------------------------------------ instances

    def create_env(self, failure: Callable[[], T]) -> tuple[Any, T | None]:
        """A new instance from the factory: ``(env, None)``, or ``(None, failure())`` when the factory raised.

        The one place a factory's failure is handled: it is logged with its
        traceback and the caller answers with what ``failure`` makes (an
        error frame, a ``500``, a JSON-RPC error).
        """
        try:
            return self.factory(), None
        except Exception:
            logger.exception("environment factory %r failed", self.factory_name)
            return None, failure()

    def with_fresh_env(self, use: Callable[[Any], T], failure: Callable[[], T]) -> T:
        """``use(env)`` on a throw-away instance, closed afterwards; ``failure()`` when the factory raised.

        For the stateless routes (``POST /reset``, ``/step``, ``/mcp`` without
        a session): the instance holds no capacity slot.
        """
        env, error = self.create_env(failure)
        if error is not None:
            return error
        try:
            return use(env)
        finally:
            close_quietly(env)

    # ------------------------------------- the environment, described (GET routes)

    def get_may_block(self, path: str) -> bool:
        """Whether answering ``GET path`` may run the factory or environment code that blocks.

        A transport on an event loop answers such a request off the loop (as
        it runs a blocking environment's ``reset``/``step`` on a thread):
        ``/state`` makes a fresh instance (on the loop only for an environment
        class that `opens_on_loop()`, as its sessions are), and ``/metadata``
        and ``/schema`` make one, once, when the factory is not a class.
        ``/health`` and unknown paths touch no environment.
        """
        if path == "/state":
            cls = self.known_class
            return cls is None or not opens_on_loop(cls)
        if path in ("/metadata", "/schema"):
            return self.known_class is None
        return False

    def env_class(self) -> type:
        """The environment class (for a non-class factory: by creating and closing one instance, once)."""
        cls = self.known_class
        if cls is None:
            env = self.factory()
            try:
                cls = type(env)
            finally:
                close_quietly(env)
            self.known_class = cls
        return cls

    @property
    def name(self) -> str:
        """The environment's name (``name`` argument, else its class name)."""
        return self._name or self.env_class().__name__

    def metadata(self) -> dict[str, Any]:
        """The body of ``GET /metadata``."""
        name = self.name
        version = getattr(self.env_class(), "version", None)
        if not isinstance(version, str):
            from openenv._facade import version as package_version

            version = package_version()
        return {
            "name": name,
            "description": f"{name} environment",
            "readme_content": None,
            "version": version,
            "author": None,
            "documentation_url": None,
        }

    def schemas(self) -> dict[str, Any]:
        """The body of ``GET /schema``."""
        schema = self._schema
        if schema is None:
            cls = self.env_class()
            action_type: type[BaseModel] = getattr(cls, "action_type", Action)
            observation_type: type[BaseModel] = getattr(cls, "observation_type", Observation)
            reset_type: type[BaseModel] = getattr(cls, "reset_observation_type", None) or observation_type
            state_type: type[BaseModel] = getattr(cls, "state_type", State)
            schema = {
                "action": action_type.model_json_schema(),
                "observation": observation_type.model_json_schema(),
                "state": state_type.model_json_schema(),
                "reset_observation": reset_type.model_json_schema(),
            }
            self._schema = schema
        return schema

    def fresh_state(self) -> dict[str, Any]:
        """The body of ``GET /state``: a fresh instance's state, filtered through its declared state model."""
        env = self.factory()
        try:
            state = env.state
            fields = getattr(type(env), "state_type", State).model_fields
            dumped = state.model_dump() if isinstance(state, BaseModel) else dict(state)
            return {k: v for k, v in dumped.items() if k in fields}
        finally:
            close_quietly(env)
