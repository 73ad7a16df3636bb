"""Typed environments, described once and used by both twins.

A :class:`Codec` turns actions into JSON payloads and replies into results.
The generic codec works with plain dicts; give it pydantic models (or
subclass it and override OpenEnv's hook names ``_step_payload``,
``_parse_result`` and ``_parse_state``) for a typed client::

    echo = Codec(action=EchoAction, observation=EchoObservation, state=State)
    env = Env(url, codec=echo)          # openenv.sync.Env or openenv.aio.Env

A model may also be a union of models (``MoveAction | ResignAction``), told
apart by a ``Literal`` field such as ``type``: actions and observations are
then validated with a pydantic ``TypeAdapter`` of the union.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from .errors import ProtocolError
from .frames import parse_step_result
from .result import StepResult

if TYPE_CHECKING:
    pass

# pydantic is imported on first use of a model, not with the client: generic
# (dict) use never needs it, and importing it costs more than the client itself.

__all__ = ["Codec", "ActT", "ObsT", "StateT"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")


class Codec(Generic[ActT, ObsT, StateT]):
    """How one environment's actions, observations and state look on the wire.

    Args:
        action: the action model; dicts given to ``step`` are validated with it
            before anything is sent.
        observation: the observation model built from each step result.
        state: the state model built from ``state()`` replies.

    Each is optional: without a model, that part stays a plain dict.  Each may
    be a union of models (``MoveAction | ResignAction``): an action must be an
    instance of one member, and dicts and replies validate to the member that
    matches (give the members a ``Literal`` field, such as ``type``, that tells
    them apart).
    Subclasses may set the models as class attributes ``action_type``,
    ``observation_type`` and ``state_type`` instead, and may override the hooks.
    """

    action_type: type[Any] | None = None
    observation_type: type[Any] | None = None
    state_type: type[Any] | None = None

    @overload
    def __init__(
        self,
        action: type[ActT] | None = None,
        observation: type[ObsT] | None = None,
        state: type[StateT] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Codec[Any, Any, Any],
        action: Any = None,
        observation: Any = None,
        state: Any = None,
    ) -> None: ...  # a union of models (``A | B``) is not a ``type`` for type checkers

    def __init__(self, action: Any = None, observation: Any = None, state: Any = None) -> None:
        if action is not None:
            self.action_type = action
        if observation is not None:
            self.observation_type = observation
        if state is not None:
            self.state_type = state

    def __repr__(self) -> str:
        names = [
            f"{key}={_name(model)}"
            for key, model in (
                ("action", self.action_type),
                ("observation", self.observation_type),
                ("state", self.state_type),
            )
            if model is not None
        ]
        return f"{type(self).__name__}({', '.join(names)})"

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> Codec[Any, Any, Any]:
        """A codec whose models are built at runtime from a ``GET /schema`` response.

        The ``action``, ``observation`` and ``state`` JSON Schemas become
        pydantic models (nested ``$defs``, enums, optional fields and the usual
        constraints included; see :mod:`openenv._core.schema`), so actions are
        validated before they are sent.  A part missing from ``schema`` stays a
        plain dict.  The models are on ``action_type``, ``observation_type`` and
        ``state_type``; build actions with ``codec.action_type(...)`` or pass dicts.
        """
        from .schema import models_from_schema

        action, observation, state = models_from_schema(schema)
        codec: Codec[Any, Any, Any] = _SchemaCodec(action, observation, state)
        return codec

    # OpenEnv's hook names -------------------------------------------------

    def _step_payload(self, action: ActT) -> dict[str, Any]:
        """Turn an action into the JSON object sent in the ``step`` frame."""
        model = self.action_type
        if model is None and type(action) is dict:
            return cast("dict[str, Any]", action)  # the hot path of generic use: sent as is, never modified
        from pydantic import BaseModel

        if isinstance(action, BaseModel):
            if model is not None and not isinstance(action, _members(model)):
                raise TypeError(f"expected a {_name(model)} action, got {type(action).__name__}")
            return action.model_dump(mode="json")
        if isinstance(action, Mapping):
            if model is None:
                return dict(action)
            # validate before sending: a bad action fails here, with pydantic's message
            return cast(BaseModel, _validate(model, action)).model_dump(mode="json")
        raise TypeError(f"an action must be a dict or a pydantic model, not {type(action).__name__}")

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Turn the ``data`` of an ``observation`` frame into a :class:`StepResult`."""
        result = parse_step_result(payload)
        model = self.observation_type
        if model is None:
            return cast("StepResult[ObsT]", result)
        fields = dict(result.observation)
        known = _fields(model)
        if "done" in known:
            fields.setdefault("done", result.done)
        if "reward" in known:
            fields.setdefault("reward", payload.get("reward"))
        if "metadata" in known and "metadata" not in fields:
            fields["metadata"] = result.metadata
        from pydantic import ValidationError

        try:
            observation = _validate(model, fields)
        except ValidationError as exc:
            raise ProtocolError(f"the observation does not match {_name(model)}: {exc}") from None
        return StepResult(observation, result.reward, result.done, result.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> StateT:
        """Turn the ``data`` of a ``state`` frame into a state."""
        model = self.state_type
        if model is None:
            return cast(StateT, payload)
        from pydantic import ValidationError

        try:
            return cast(StateT, _validate(model, payload))
        except ValidationError as exc:
            raise ProtocolError(f"the state does not match {_name(model)}: {exc}") from None


def _members(model: Any) -> tuple[Any, ...]:
    """The models of a union (``A | B``, ``Union[A, B]``, ``Annotated[...]``); ``(model,)`` otherwise."""
    from typing import Annotated, Union, get_args, get_origin

    origin = get_origin(model)
    if origin is Annotated:
        return _members(get_args(model)[0])
    if origin is Union or type(model).__name__ == "UnionType":
        return tuple(member for arg in get_args(model) for member in _members(arg))
    return (model,)


def _name(model: Any) -> str:
    return " | ".join(getattr(member, "__name__", repr(member)) for member in _members(model))


def _fields(model: Any) -> dict[str, Any]:
    """The field names every member of ``model`` has (a union's common fields)."""
    found: dict[str, Any] | None = None
    for member in _members(model):
        names = dict(getattr(member, "model_fields", {}))
        found = names if found is None else {key: value for key, value in found.items() if key in names}
    return found or {}


_ADAPTERS: dict[Any, Any] = {}


def _validate(model: Any, data: Any) -> Any:
    """``model.model_validate(data)``, or a cached ``TypeAdapter`` for a union."""
    if isinstance(model, type) and hasattr(model, "model_validate"):
        return model.model_validate(data)
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[model] = TypeAdapter(model)
    return adapter.validate_python(data)


class _SchemaCodec(Codec[Any, Any, Any]):
    """A codec built by :meth:`Codec.from_schema`.

    Actions are sent with the schema's spelling of aliased names and only with
    the fields that were given (``exclude_unset``): a field the schema marks
    optional without a JSON default (pydantic's ``default_factory``) is left
    to the server's default instead of being sent as ``null``.
    """

    def _step_payload(self, action: Any) -> dict[str, Any]:
        from pydantic import BaseModel

        model = self.action_type
        if isinstance(action, BaseModel):
            if model is not None and not isinstance(action, _members(model)):
                raise TypeError(f"expected a {_name(model)} action, got {type(action).__name__}")
            return action.model_dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(action, Mapping) and model is not None:
            validated = cast(BaseModel, model.model_validate(action))
            return validated.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return super()._step_payload(action)


GENERIC: Codec[Any, Any, Any] = Codec()
