"""What the server writes on the wire: strict JSON, and the frames of ``/ws``.

Everything the server sends is strict JSON (RFC 8259): ``allow_nan=False``.
Observations and states that hold NaN/Infinity are an environment bug and
give an ``EXECUTION_ERROR`` (`Unsendable`); error details (which echo the
client's input, and Python's ``json`` accepts ``NaN`` on input) are sanitised
instead (`jsonable()`).

The envelope models only produce pydantic-style errors for bad frames
(`envelope_error()`); the fast path in `openenv.server.protocol.Session`
checks envelopes by hand.  Nothing here touches an environment, a socket or
a session.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

from openenv._core import jsontext
from openenv._core.errors import ErrorCode

__all__ = [
    "dumps",
    "jsonable",
    "safe_str",
    "error_frame",
    "validation_frame",
    "step_result",
    "Unsendable",
    "observation_frame",
    "state_frame",
    "Message",
    "ResetMessage",
    "DataMessage",
    "BareMessage",
    "envelope_error",
]

# --------------------------------------------------------------------------- #
# Envelope models: only used to produce pydantic-style errors for bad frames. #
# The fast path checks envelopes by hand.                                      #
# --------------------------------------------------------------------------- #


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str


class ResetMessage(Message):
    data: dict[str, Any] = Field(default_factory=dict)


class DataMessage(Message):  # step, mcp
    data: dict[str, Any]


class BareMessage(Message):  # state, close
    pass


# ------------------------------ serialisation ------------------------------ #


def _strict_default(obj: Any) -> Any:
    """``json.dumps`` fallback for observation/state values (pydantic's JSON rules)."""
    return to_jsonable_python(obj)


#: Strict JSON with pydantic's rules for other values (`openenv._core.jsontext`: made once, the C encoder reused).
_dumps = jsontext.encoder(allow_nan=False, default=_strict_default)


def dumps(obj: Any) -> str:
    """Strict JSON; raises ``ValueError`` for non-finite floats, ``TypeError``-likes for other values.

    The same text and the same errors as ``json.dumps(obj, separators=(",", ":"),
    ensure_ascii=False, allow_nan=False, default=...)``.
    """
    return _dumps(obj)


_MAX_DETAIL_DEPTH = 32
_MAX_INT_BITS = 4096  # ~1233 digits; CPython refuses to print ints of more than 4300 digits


def _float_text(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def jsonable(obj: Any, depth: int = 0) -> Any:
    """Error details as strict-JSON-able values; never raises.

    Non-finite floats become the strings ``"NaN"``, ``"Infinity"`` and
    ``"-Infinity"``; structures deeper than a limit, huge integers and values
    that have no JSON form become short strings.
    """
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, int):
        return obj if obj.bit_length() <= _MAX_INT_BITS else f"<int of {obj.bit_length()} bits>"
    if isinstance(obj, float):
        return _float_text(obj)
    if depth >= _MAX_DETAIL_DEPTH:
        return "<nested too deep>"
    if isinstance(obj, Mapping):
        return {_key_text(k): jsonable(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, depth + 1) for v in obj]
    try:
        converted = to_jsonable_python(obj)
    except Exception:
        return safe_str(obj)
    if isinstance(converted, (dict, list, tuple, str, int, float)) or converted is None:
        return jsonable(converted, depth + 1)
    return safe_str(obj)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return str(_float_text(key))
    return safe_str(key)


def safe_str(obj: Any) -> str:
    """``str(obj)``, or ``<TypeName>`` when that raises."""
    try:
        return str(obj)
    except Exception:
        return f"<{type(obj).__name__}>"


# ----------------------------------------------------------------- frames


def error_frame(code: str, message: str, **extra: Any) -> str:
    """An ``error`` frame: ``{"type":"error","data":{"message":..,"code":..,**extra}}``, always strict JSON."""
    data: dict[str, Any] = {"message": message, "code": code}
    data.update(extra)
    frame = {"type": "error", "data": jsonable(data)}
    try:
        return json.dumps(frame, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):  # never expected: jsonable makes it safe
        fallback = {"type": "error", "data": {"message": safe_str(message), "code": code}}
        return json.dumps(fallback, separators=(",", ":"), ensure_ascii=True)


def validation_frame(exc: ValidationError) -> str:
    """The ``VALIDATION_ERROR`` frame for a pydantic error (its ``errors`` list, without URLs)."""
    return error_frame(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=exc.errors(include_url=False))


_BASE_DUMP = BaseModel.model_dump

#: ``model_dump()``'s defaults that pydantic-core's ``to_python`` does not share: ``by_alias`` (``False``
#: before pydantic 2.11, where ``to_python`` defaulted to ``True``; ``None``, the model's config, since).
_DUMP_DEFAULTS: dict[str, Any] = {
    name: param.default
    for name, param in inspect.signature(BaseModel.model_dump).parameters.items()
    if name == "by_alias" and param.default is not None
}


def step_result(observation: Any) -> dict[str, Any]:
    """Turn an observation into the wire step result (0.10 ``/ws`` flavour).

    ``done`` and ``reward`` are lifted out of the observation to the top level;
    ``metadata`` stays in the observation and is copied to the top level only
    when it is non-empty.
    """
    if isinstance(observation, BaseModel):
        if type(observation).model_dump is _BASE_DUMP:  # what model_dump() runs, without its own call
            obs = observation.__pydantic_serializer__.to_python(observation, **_DUMP_DEFAULTS)
        else:
            obs = observation.model_dump()
    elif isinstance(observation, Mapping):
        obs = dict(observation)
    else:
        raise TypeError(f"environment returned {type(observation).__name__}, not an Observation")
    reward = obs.pop("reward", None)
    done = obs.pop("done", False)
    result: dict[str, Any] = {"observation": obs, "reward": reward, "done": done}
    metadata = obs.get("metadata")
    if metadata:
        result["metadata"] = metadata
    return result


class Unsendable(Exception):
    """A reply that has no strict-JSON form (NaN, Infinity, an unserialisable value)."""


def _reply(kind: str, what: str, payload: Any) -> str:
    try:
        body = dumps(payload)
    except (ValueError, TypeError, RecursionError) as exc:
        raise Unsendable(f"the environment's {what} cannot be sent as strict JSON: {exc}") from None
    return '{"type":"' + kind + '","data":' + body + "}"


def observation_frame(observation: Any) -> str:
    """The ``observation`` frame of a reset or step; `Unsendable` without a strict-JSON form."""
    return _reply("observation", "observation", step_result(observation))


def state_frame(state: Any) -> str:
    """The ``state`` frame; `Unsendable` without a strict-JSON form."""
    data = state.model_dump() if isinstance(state, BaseModel) else dict(state)
    return _reply("state", "state", data)


def envelope_error(model: type[Message], msg: dict[str, Any]) -> str:
    """The ``VALIDATION_ERROR`` frame pydantic gives for an invalid envelope."""
    try:
        model.model_validate(msg)
    except ValidationError as exc:
        return validation_frame(exc)
    # Unreachable when the hand-written checks mirror the models.
    return error_frame(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=[])
