"""Typed environments, described once and used by both twins.

A :class:`Codec` turns actions into JSON payloads and replies into results.
The generic codec works with plain dicts; give it pydantic models (or
subclass it and override OpenEnv's hook names ``_step_payload``,
``_parse_result`` and ``_parse_state``) for a typed client::

    echo = Codec(action=EchoAction, observation=EchoObservation, state=State)
    env = Env(url, codec=echo)          # openenv.sync.Env or openenv.aio.Env
"""

from __future__ import annotations

from typing import Any, Dict, Generic, Mapping, Optional, Type, TypeVar, cast

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from .errors import ProtocolError
from .frames import parse_step_result
from .models import StepResult

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

    Each is optional: without a model, that part stays a plain dict.
    Subclasses may set the models as class attributes ``action_type``,
    ``observation_type`` and ``state_type`` instead, and may override the hooks.
    """

    action_type: Optional[Type[Any]] = None
    observation_type: Optional[Type[Any]] = None
    state_type: Optional[Type[Any]] = None

    def __init__(
        self,
        action: Optional[Type[ActT]] = None,
        observation: Optional[Type[ObsT]] = None,
        state: Optional[Type[StateT]] = None,
    ) -> None:
        if action is not None:
            self.action_type = action
        if observation is not None:
            self.observation_type = observation
        if state is not None:
            self.state_type = state

    def __repr__(self) -> str:
        names = [
            f"{key}={model.__name__}"
            for key, model in (
                ("action", self.action_type),
                ("observation", self.observation_type),
                ("state", self.state_type),
            )
            if model is not None
        ]
        return f"{type(self).__name__}({', '.join(names)})"

    # OpenEnv's hook names -------------------------------------------------

    def _step_payload(self, action: ActT) -> Dict[str, Any]:
        """Turn an action into the JSON object sent in the ``step`` frame."""
        model = self.action_type
        if isinstance(action, BaseModel):
            if model is not None and not isinstance(action, model):
                raise TypeError(f"expected a {model.__name__} action, got {type(action).__name__}")
            return action.model_dump(mode="json")
        if isinstance(action, Mapping):
            if model is None:
                return dict(action)
            # validate before sending: a bad action fails here, with pydantic's message
            return cast(BaseModel, model.model_validate(action)).model_dump(mode="json")
        raise TypeError(f"an action must be a dict or a pydantic model, not {type(action).__name__}")

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[ObsT]:
        """Turn the ``data`` of an ``observation`` frame into a :class:`StepResult`."""
        result = parse_step_result(payload)
        model = self.observation_type
        if model is None:
            return cast(StepResult[ObsT], result)
        fields = dict(result.observation)
        known = getattr(model, "model_fields", {})
        if "done" in known:
            fields.setdefault("done", result.done)
        if "reward" in known:
            fields.setdefault("reward", payload.get("reward"))
        if "metadata" in known and "metadata" not in fields:
            fields["metadata"] = result.metadata
        try:
            observation = model.model_validate(fields)
        except PydanticValidationError as exc:
            raise ProtocolError(f"the observation does not match {model.__name__}: {exc}") from None
        return StepResult(observation, result.reward, result.done, result.metadata)

    def _parse_state(self, payload: Dict[str, Any]) -> StateT:
        """Turn the ``data`` of a ``state`` frame into a state."""
        model = self.state_type
        if model is None:
            return cast(StateT, payload)
        try:
            return cast(StateT, model.model_validate(payload))
        except PydanticValidationError as exc:
            raise ProtocolError(f"the state does not match {model.__name__}: {exc}") from None


GENERIC: Codec[Any, Any, Any] = Codec()
