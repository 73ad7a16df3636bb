"""Data models of the duel environment.

Two kinds of action, told apart by ``type``:

* ``MoveAction(type="move", stance=...)``: ``strike`` beats ``feint``, ``feint``
  beats ``guard``, ``guard`` beats ``strike``; the loser of a round loses 1 HP;
* ``ResignAction(type="resign", reason=...)``: the game ends, the opponent wins.

Two kinds of observation, told apart by ``kind``: a ``RoundObservation`` while
the duel goes on (and from ``reset``), a ``GameOverObservation`` when it ends.

The released server takes one ``action_cls``: :class:`DuelAction` is an
``Action`` whose ``model_validate`` dispatches on ``type`` to the two action
models (so the environment receives a real ``MoveAction`` or ``ResignAction``)
and whose ``model_json_schema`` is the discriminated union of both, so ``GET
/schema`` describes them.  :class:`DuelObservation` does the same for the
observation schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, GenerateJsonSchema, JsonSchemaMode

from openenv.core.env_server.types import Action, Observation, State

Stance = Literal["strike", "guard", "feint"]
STANCES: tuple[str, ...] = ("strike", "guard", "feint")
BEATS = {"strike": "feint", "feint": "guard", "guard": "strike"}
START_HP = 3
MAX_ROUNDS = 30


class MoveAction(Action):
    """Take a stance for this round."""

    type: Literal["move"] = "move"
    stance: Stance


class ResignAction(Action):
    """Give up: the opponent wins."""

    type: Literal["resign"] = "resign"
    reason: str = Field(default="", max_length=200)


class RoundObservation(Observation):
    """The duel goes on (``round`` is 0 after ``reset``)."""

    kind: Literal["round"] = "round"
    round: int = 0
    you: Stance | None = None
    opponent: Stance | None = None
    round_winner: Literal["you", "opponent", "draw"] | None = None
    your_hp: int = START_HP
    opponent_hp: int = START_HP


class GameOverObservation(Observation):
    """The duel is over."""

    kind: Literal["game_over"] = "game_over"
    winner: Literal["you", "opponent", "draw"]
    reason: Literal["knockout", "resigned", "rounds"]
    rounds: int
    your_hp: int
    opponent_hp: int
    message: str = ""


class DuelState(State):
    your_hp: int = START_HP
    opponent_hp: int = START_HP
    finished: bool = False
    winner: str | None = None
    history: list[list[str]] = Field(default_factory=list)


AnyAction = Annotated[Union[MoveAction, ResignAction], Field(discriminator="type")]  # noqa: UP007
AnyObservation = Annotated[Union[RoundObservation, GameOverObservation], Field(discriminator="kind")]  # noqa: UP007
ACTIONS: TypeAdapter[Any] = TypeAdapter(AnyAction)
OBSERVATIONS: TypeAdapter[Any] = TypeAdapter(AnyObservation)


def _validate(
    adapter: TypeAdapter[Any], obj: Any, strict: bool | None, from_attributes: bool | None, context: Any
) -> Any:
    options = {"strict": strict, "from_attributes": from_attributes, "context": context}
    return adapter.validate_python(obj, **{key: value for key, value in options.items() if value is not None})


def _schema(
    adapter: TypeAdapter[Any],
    title: str,
    by_alias: bool,
    ref_template: str,
    schema_generator: type[GenerateJsonSchema],
    mode: JsonSchemaMode,
) -> dict[str, Any]:
    schema = adapter.json_schema(
        by_alias=by_alias, ref_template=ref_template, schema_generator=schema_generator, mode=mode
    )
    schema["title"] = title
    return schema


class DuelAction(Action):
    """The server's ``action_cls``: validates to a ``MoveAction`` or a ``ResignAction``, by ``type``."""

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        **kwargs: Any,
    ) -> Any:
        return _validate(ACTIONS, obj, strict, from_attributes, context)

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool = True,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = GenerateJsonSchema,
        mode: JsonSchemaMode = "validation",
        **kwargs: Any,
    ) -> dict[str, Any]:
        return _schema(ACTIONS, cls.__name__, by_alias, ref_template, schema_generator, mode)


class DuelObservation(Observation):
    """The server's ``observation_cls``: a ``RoundObservation`` or a ``GameOverObservation``, by ``kind``."""

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        **kwargs: Any,
    ) -> Any:
        return _validate(OBSERVATIONS, obj, strict, from_attributes, context)

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool = True,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = GenerateJsonSchema,
        mode: JsonSchemaMode = "validation",
        **kwargs: Any,
    ) -> dict[str, Any]:
        return _schema(OBSERVATIONS, cls.__name__, by_alias, ref_template, schema_generator, mode)
