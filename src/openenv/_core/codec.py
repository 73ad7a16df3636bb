"""Typed environments, described once and used by both twins (sans-IO).

A [`Codec`][openenv.sync.Codec] turns actions into JSON payloads and replies into results.
The generic codec works with plain dicts; give it pydantic models (or unions
of them), subclass it and override OpenEnv's hook names ``_step_payload``,
``_parse_result`` and ``_parse_state``, or adopt an environment's own OpenEnv
``EnvClient`` subclass:

```python
echo = Codec(action=EchoAction, observation=EchoObservation, state=State)
env = Env(url, codec=echo)          # openenv.sync.Env or openenv.aio.Env
env = Env(url, codec=EchoEnv)       # the environment's client.py class, unchanged
```

Every decision is made here, without IO: which model an observation becomes,
whether an action may be sent, and how an adopted client's step result is
converted.  A reply that cannot be parsed raises [`ParseError`][openenv.sync.ParseError]
(the server did the work; the session goes on); an action that cannot be sent
raises [`InvalidAction`][openenv.sync.InvalidAction] before anything is sent.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from .errors import InvalidAction, InvalidActionType, ParseError
from .frames import parse_step_result
from .result import StepResult

if TYPE_CHECKING:
    from pydantic import BaseModel

# pydantic is imported on first use of a model, not with the client: generic
# (dict) use never needs it, and importing it costs more than the client itself.

__all__ = [
    "Codec",
    "ActT",
    "ObsT",
    "StateT",
    "Models",
    "as_codec",
    "is_client_class",
    "client_step_result",
    "CLIENT_HOOKS",
]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")

CLIENT_HOOKS = ("_step_payload", "_parse_result", "_parse_state")
_COMMON = ("done", "reward", "metadata")
_USAGE = (
    "a pydantic model class, a union of them (A | B, Union[A, B], "
    'Annotated[A | B, Field(discriminator="type")]) or a list of them'
)


class Models:
    """One part of a codec (action, observation, ...): a pydantic model or a union of them.

    Built from what the user gave (checked at once: anything else is a
    `TypeError`); validates with the model itself, or with a pydantic
    ``TypeAdapter`` for a union (smart mode, or the union's discriminator).

    Attributes:
        spec: the type as given (a list becomes a ``Union``).
        members: the model classes of the union, in order.
        shared_fields: the field names every member has.
    """

    __slots__ = ("spec", "members", "shared_fields", "_adapter")

    def __init__(self, spec: Any, role: str) -> None:
        members = _members(spec, role)
        if not members:
            raise TypeError(f"Codec({role}=...) takes {_USAGE}; got an empty list")
        if isinstance(spec, (list, tuple)):
            spec = members[0] if len(members) == 1 else typing.Union[tuple(members)]  # noqa: UP007 - built at run time
        self.spec = spec
        self.members = members
        shared = set(members[0].model_fields)
        for member in members[1:]:
            shared &= set(member.model_fields)
        self.shared_fields = frozenset(shared)
        self._adapter: Any = None

    @property
    def single(self) -> type[BaseModel] | None:
        """The model, when this part is one plain model (not a union)."""
        return self.members[0] if self.spec is self.members[0] else None

    @property
    def name(self) -> str:
        return " | ".join(member.__name__ for member in self.members)

    def validate(self, data: Any) -> Any:
        """A model instance from ``data``; raises pydantic's ``ValidationError``."""
        single = self.single
        if single is not None:
            return single.model_validate(data)
        if self._adapter is None:
            from pydantic import TypeAdapter

            self._adapter = TypeAdapter(self.spec)
        return self._adapter.validate_python(data)

    def owns(self, instance: Any) -> bool:
        """Whether ``instance`` is a model of this part (of one of the union's members)."""
        return isinstance(instance, self.members)


def _members(spec: Any, role: str) -> tuple[type[BaseModel], ...]:
    """The pydantic model classes of a codec part, or a TypeError saying what is accepted."""
    from pydantic import BaseModel

    if isinstance(spec, (list, tuple)):
        found: list[type[BaseModel]] = []
        for item in spec:
            for member in _members(item, role):
                if member not in found:
                    found.append(member)
        return tuple(found)
    if isinstance(spec, type) and not typing.get_args(spec):
        if issubclass(spec, BaseModel):
            return (spec,)
        raise TypeError(f"Codec({role}={spec.__name__}) is not a pydantic model; Codec({role}=...) takes {_USAGE}")
    origin = typing.get_origin(spec)
    if origin is typing.Annotated:
        return _members(typing.get_args(spec)[0], role)
    if origin is typing.Union or origin is types.UnionType:
        out: list[type[BaseModel]] = []
        for arg in typing.get_args(spec):
            out.extend(_members(arg, role))
        return tuple(out)
    raise TypeError(f"Codec({role}={spec!r}) is not supported; Codec({role}=...) takes {_USAGE}")


def _models(spec: Any, role: str) -> Models | None:
    if spec is None:
        return None
    if isinstance(spec, Models):
        return spec
    return Models(spec, role)


class Codec(Generic[ActT, ObsT, StateT]):
    """How one environment's actions, observations and state look on the wire.

    Args:
        action: the action model, or several (a union ``A | B``,
            ``Union[A, B]``, ``Annotated[A | B, Field(discriminator="type")]``
            or a list ``[A, B]``); dicts given to ``step`` are validated with
            it before anything is sent, and a model instance of any member is
            sent as is.
        observation: the observation model (or several, chosen by the
            payload's shape or the union's discriminator) built from each step result.
        state: the state model built from ``state()`` replies.
        reset_observation: the model of ``reset`` replies when it differs
            from ``observation`` (default: ``observation``).

    Each is optional: without a model, that part stays a plain dict.
    Subclasses may set the models as class attributes ``action_type``,
    ``observation_type``, ``state_type`` and ``reset_observation_type``
    instead, and may override the hooks.

    Raises:
        TypeError: a part is not a pydantic model, a union or a list of them.
    """

    action_type: Any = None
    observation_type: Any = None
    state_type: Any = None
    reset_observation_type: Any = None

    _dump_options: dict[str, Any] = {"mode": "json"}

    @overload
    def __init__(
        self: Codec[ActT, ObsT, StateT],
        action: type[ActT] | None = None,
        observation: type[ObsT] | None = None,
        state: type[StateT] | None = None,
        *,
        reset_observation: type[Any] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Codec[Any, Any, Any],
        action: Any = None,
        observation: Any = None,
        state: Any = None,
        *,
        reset_observation: Any = None,
    ) -> None: ...

    def __init__(
        self,
        action: Any = None,
        observation: Any = None,
        state: Any = None,
        *,
        reset_observation: Any = None,
    ) -> None:
        if action is not None:
            self.action_type = action
        if observation is not None:
            self.observation_type = observation
        if state is not None:
            self.state_type = state
        if reset_observation is not None:
            self.reset_observation_type = reset_observation
        # checked now, never after the server ran a step
        self._action = _models(self.action_type, "action")
        self._observation = _models(self.observation_type, "observation")
        self._state = _models(self.state_type, "state")
        self._reset_observation = _models(self.reset_observation_type, "reset_observation")
        for part, attr in (
            (self._action, "action_type"),
            (self._observation, "observation_type"),
            (self._state, "state_type"),
            (self._reset_observation, "reset_observation_type"),
        ):
            if part is not None:
                setattr(self, attr, part.spec)

    def __repr__(self) -> str:
        names = [
            f"{key}={part.name}"
            for key, part in (
                ("action", self._action),
                ("observation", self._observation),
                ("state", self._state),
                ("reset_observation", self._reset_observation),
            )
            if part is not None
        ]
        return f"{type(self).__name__}({', '.join(names)})"

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> Codec[Any, Any, Any]:
        """A codec whose models are built at runtime from a ``GET /schema`` response.

        The ``action``, ``observation`` and ``state`` JSON Schemas become
        pydantic models (nested ``$defs``, enums, optional fields and the usual
        constraints included; see `openenv._core.schema`), so actions are
        validated before they are sent.  A part missing from ``schema`` stays a
        plain dict.  The models are on ``action_type``, ``observation_type`` and
        ``state_type``; build actions with ``codec.action_type(...)`` or pass dicts.

        ``reset`` replies are parsed with the schema's ``reset_observation``
        when it has one, else with ``observation`` when they match it, else
        (an MCP environment's reset observation is not a ``CallToolObservation``)
        with a permissive base observation (``done``, ``reward``, ``metadata``
        and every other key kept): a reset never fails for its shape.

        Raises:
            TypeError: ``schema`` is not a JSON object.
        """
        from .schema import model_from_schema, models_from_schema

        action, observation, state = models_from_schema(schema)
        reset_schema = schema.get("reset_observation")
        reset = (
            model_from_schema(reset_schema, "ResetObservation", outgoing=False)
            if isinstance(reset_schema, Mapping)
            else None
        )
        return _SchemaCodec(action, observation, state, reset_observation=reset)

    @classmethod
    def from_client(cls, client_class: type[Any]) -> Codec[Any, Any, Any]:
        """Adopt an OpenEnv ``EnvClient`` subclass (an environment's ``client.py``) as a codec.

        Its ``_step_payload``, ``_parse_result`` and ``_parse_state`` hooks are
        called on an instance made with ``object.__new__`` (its ``__init__``,
        which would open connections, never runs), and its ``StepResult`` is
        converted to ours, keeping its observation object as is.  Errors from
        its hooks become [`InvalidAction`][openenv.sync.InvalidAction] (an action it cannot
        encode) or [`ParseError`][openenv.sync.ParseError] (a reply it cannot parse).
        ``Env(url, codec=client_class)`` does the same.

        Args:
            client_class: the class, such as ``class EchoEnv(EnvClient[EchoAction,
                EchoObservation, State])``; not an instance.

        Raises:
            TypeError: it is not a class with the three hooks, or cannot be
                instantiated without ``__init__`` (an abstract class).
        """
        return _ClientCodec(client_class)

    def _step_functions(self) -> tuple[Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], StepResult[ObsT]]]:
        """What a step calls: the encoder of its action and the parser of its reply, in their shortest form.

        The hooks below, unless this codec has no model for that part and does
        not override the hook: then a dict action goes out as it is (anything
        else through `encode_action`) and the reply goes to
        `openenv._core.frames.parse_step_result` directly, which is what the
        hooks would do, a few calls shorter (``Env`` takes them once).
        """
        cls = type(self)
        encode: Callable[[Any], dict[str, Any]] = self._step_payload
        if cls._step_payload is Codec._step_payload and self._action is None:
            options = self._dump_options

            def encode(action: Any) -> dict[str, Any]:
                if type(action) is dict:
                    return cast("dict[str, Any]", action)
                return encode_action(None, action, options)

        parse: Callable[[dict[str, Any]], StepResult[ObsT]] = self._parse_result
        if cls._parse_result is Codec._parse_result and self._observation is None:
            parse = parse_step_result  # type: ignore[assignment]  # plain: dict observations
        return encode, parse

    # OpenEnv's hook names -------------------------------------------------

    def _step_payload(self, action: ActT) -> dict[str, Any]:
        """Turn an action into the JSON object sent in the ``step`` frame.

        Raises:
            InvalidAction: the action fails the action model (``errors`` from pydantic).
            InvalidActionType: it is not a dict or a model of the action union.
        """
        return encode_action(self._action, action, self._dump_options)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Turn the ``data`` of an ``observation`` frame into a [`StepResult`][openenv.sync.StepResult].

        Raises:
            ParseError: the observation does not match the observation model.
        """
        return parse_observation(self._observation, payload)

    def _parse_reset(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Turn the ``data`` of a ``reset`` reply into a [`StepResult`][openenv.sync.StepResult].

        Uses ``reset_observation_type`` when set, else [`_parse_result()`][openenv.sync.Codec._parse_result].
        """
        if self._reset_observation is None:
            return self._parse_result(payload)
        return parse_observation(self._reset_observation, payload)

    def _parse_state(self, payload: dict[str, Any]) -> StateT:
        """Turn the ``data`` of a ``state`` frame into a state.

        Raises:
            ParseError: the state does not match the state model.
        """
        part = self._state
        if part is None:
            return cast(StateT, payload)
        from pydantic import ValidationError

        try:
            return cast(StateT, part.validate(payload))
        except ValidationError as exc:
            raise ParseError(
                f"the state does not match {part.name}: {exc}; the raw reply is on .payload",
                payload=payload,
                kind="state",
            ) from None


# -- decisions, shared by every codec ------------------------------------------------


def encode_action(part: Models | None, action: Any, dump_options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object to send for ``action``, validated against ``part``.

    Raises:
        InvalidAction: a dict fails validation (``errors`` from pydantic).
        InvalidActionType: not a dict or a pydantic model, or a model that is
            not a member of ``part``.
    """
    if part is None and type(action) is dict:
        return cast("dict[str, Any]", action)  # the hot path of generic use: sent as is, never modified
    if isinstance(action, Mapping):
        if part is None:
            return dict(action)
        from pydantic import ValidationError

        try:
            validated = part.validate(action)
        except ValidationError as exc:
            raise InvalidAction(
                f"the action does not match {part.name}: {exc}",
                errors=exc.errors(include_url=False),
            ) from None
        return cast("dict[str, Any]", validated.model_dump(**dump_options))
    from pydantic import BaseModel

    if isinstance(action, BaseModel):
        if part is not None and not part.owns(action):
            raise InvalidActionType(f"expected an action of type {part.name}, got {type(action).__name__}")
        return action.model_dump(**dump_options)
    expected = f"a dict or a {part.name}" if part is not None else "a dict or a pydantic model"
    raise InvalidActionType(f"an action must be {expected}, not {type(action).__name__}")


def parse_observation(part: Models | None, payload: dict[str, Any]) -> StepResult[Any]:
    """A [`StepResult`][openenv.sync.StepResult] whose observation is a model of ``part`` (a dict without one).

    The step result's ``done``, ``reward`` and ``metadata`` are copied into
    the observation when every member of ``part`` has that field.  For a
    union, the member is chosen by pydantic (the discriminator, or the
    payload's shape in smart mode).

    Raises:
        ParseError: no member matches (``payload`` keeps the raw reply).
        ProtocolError: the reply is not a step result at all (no observation object).
    """
    result = parse_step_result(payload)
    if part is None:
        return result
    fields = dict(result.observation)
    known = part.shared_fields
    if "done" in known:
        fields.setdefault("done", result.done)
    if "reward" in known:
        fields.setdefault("reward", payload.get("reward"))
    if "metadata" in known and "metadata" not in fields:
        fields["metadata"] = result.metadata
    from pydantic import ValidationError

    try:
        observation = part.validate(fields)
    except ValidationError as exc:
        raise ParseError(
            f"the observation does not match {part.name}: {exc}; the step happened on the "
            "server and the session goes on; the raw reply is on .payload",
            payload=payload,
            kind="observation",
        ) from None
    return StepResult(observation, result.reward, result.done, result.metadata)


class _SchemaCodec(Codec[Any, Any, Any]):
    """A codec built by [`Codec.from_schema()`][openenv.sync.Codec.from_schema].

    Actions are sent with the schema's spelling of aliased names and only with
    the fields that were given (``exclude_unset``): a field the schema marks
    optional without a JSON default (pydantic's ``default_factory``) is left
    to the server's default instead of being sent as ``null``.  Reset replies
    never fail for their shape (see [`Codec.from_schema()`][openenv.sync.Codec.from_schema]).
    """

    _dump_options = {"mode": "json", "by_alias": True, "exclude_unset": True}

    def _parse_reset(self, payload: dict[str, Any]) -> StepResult[Any]:
        for part in (self._reset_observation, self._observation):
            if part is None:
                continue
            try:
                return parse_observation(part, payload)
            except ParseError:
                continue
        from .schema import permissive_observation

        return parse_observation(Models(permissive_observation(), "reset_observation"), payload)


# -- adopted OpenEnv clients ----------------------------------------------------------


def is_client_class(value: Any) -> bool:
    """Whether ``value`` is a class (not a [`Codec`][openenv.sync.Codec]) with OpenEnv's three client hooks."""
    return (
        isinstance(value, type)
        and not issubclass(value, Codec)
        and all(callable(getattr(value, hook, None)) for hook in CLIENT_HOOKS)
    )


def client_step_result(value: Any, payload: Mapping[str, Any]) -> StepResult[Any]:
    """Our [`StepResult`][openenv.sync.StepResult] from what an adopted client's ``_parse_result`` returned.

    The released ``StepResult`` dataclass (``observation``, ``reward``,
    ``done``) is converted keeping its observation object as is; ``metadata``
    comes from the reply (top level, else the observation's), else from the
    observation object's ``metadata`` attribute.

    Raises:
        ParseError: ``value`` has no ``observation``.
    """
    if isinstance(value, StepResult):
        return value
    if not hasattr(value, "observation"):
        raise ParseError(
            f"the client's _parse_result returned {type(value).__name__}, not a StepResult",
            payload=payload,
            kind="observation",
        )
    observation = value.observation
    reward = getattr(value, "reward", None)
    if reward is not None and not isinstance(reward, bool):
        try:
            reward = float(reward)
        except (TypeError, ValueError):
            pass
    metadata = payload.get("metadata")
    if not isinstance(metadata, dict):
        raw = payload.get("observation")
        metadata = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(metadata, dict):
        metadata = getattr(observation, "metadata", None)
    return StepResult(observation, reward, bool(getattr(value, "done", False)), dict(metadata or {}))


def _generic_args(cls: type[Any]) -> tuple[Any, ...]:
    """The ``[Action, Observation, State]`` arguments of an ``EnvClient[...]`` base, if any."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(base)
            if len(args) == 3:
                return args
    return ()


class _ClientCodec(Codec[Any, Any, Any]):
    """An OpenEnv ``EnvClient`` subclass used as a codec (see [`from_client()`][openenv.sync.Codec.from_client])."""

    def __init__(self, client_class: type[Any]) -> None:
        if not is_client_class(client_class):
            raise TypeError(
                f"{client_class!r} is not an OpenEnv client class: it needs the methods "
                f"{', '.join(CLIENT_HOOKS)} (pass the class, not an instance)"
            )
        super().__init__()
        try:
            self._client = object.__new__(client_class)
        except TypeError as exc:
            raise TypeError(f"cannot adopt {client_class.__name__} as a codec: {exc}") from None
        self.client_class = client_class
        for attr, arg in zip(
            ("action_type", "observation_type", "state_type"), _generic_args(client_class), strict=False
        ):
            if isinstance(arg, type):
                setattr(self, attr, arg)  # informational: the client's hooks do the work

    def __repr__(self) -> str:
        return f"Codec.from_client({self.client_class.__qualname__})"

    def _step_payload(self, action: Any) -> dict[str, Any]:
        try:
            payload = self._client._step_payload(action)
        except (TypeError, AttributeError) as exc:
            raise InvalidActionType(
                f"{self.client_class.__name__}._step_payload cannot encode a {type(action).__name__}: {exc}"
            ) from exc
        except Exception as exc:
            if isinstance(exc, InvalidAction):
                raise
            raise InvalidAction(f"{self.client_class.__name__}._step_payload failed: {exc}") from exc
        if not isinstance(payload, Mapping):
            raise InvalidActionType(
                f"{self.client_class.__name__}._step_payload returned {type(payload).__name__}, not a dict"
            )
        return dict(payload)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Any]:
        try:
            value = self._client._parse_result(payload)
        except Exception as exc:
            raise ParseError(
                f"{self.client_class.__name__}._parse_result failed: {type(exc).__name__}: {exc}; the "
                "step happened on the server and the session goes on; the raw reply is on .payload",
                payload=payload,
                kind="observation",
            ) from exc
        return client_step_result(value, payload)

    def _parse_reset(self, payload: dict[str, Any]) -> StepResult[Any]:
        return self._parse_result(payload)  # OpenEnv clients parse reset replies with _parse_result

    def _parse_state(self, payload: dict[str, Any]) -> Any:
        try:
            return self._client._parse_state(payload)
        except Exception as exc:
            raise ParseError(
                f"{self.client_class.__name__}._parse_state failed: {type(exc).__name__}: {exc}; "
                "the raw reply is on .payload",
                payload=payload,
                kind="state",
            ) from exc


def as_codec(codec: Any) -> Codec[Any, Any, Any]:
    """The codec for ``Env(..., codec=codec)``.

    Accepts ``None`` (plain dicts), a [`Codec`][openenv.sync.Codec], a [`Codec`][openenv.sync.Codec]
    subclass (instantiated) or an OpenEnv ``EnvClient`` subclass (adopted
    with [`Codec.from_client()`][openenv.sync.Codec.from_client]).

    Raises:
        TypeError: anything else, including ``"schema"`` (which needs a server
            to ask: ``Env.from_schema`` / ``Env.from_env(..., codec="schema")``).
    """
    if codec is None:
        return GENERIC
    if isinstance(codec, Codec):
        return codec
    if isinstance(codec, type) and issubclass(codec, Codec):
        return codec()
    if is_client_class(codec):
        return Codec.from_client(codec)
    if codec == "schema":
        raise TypeError(
            "codec='schema' needs the server's GET /schema, and Env(...) does no IO: use "
            "Env.from_schema(target) or Env.from_env(target, codec='schema')"
        )
    raise TypeError(
        f"codec must be a Codec, an OpenEnv EnvClient subclass (with {', '.join(CLIENT_HOOKS)}) or None, not {codec!r}"
    )


GENERIC: Codec[Any, Any, Any] = Codec()
