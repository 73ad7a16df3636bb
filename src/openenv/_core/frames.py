"""Frame encoding and reply checking for the session WebSocket (``/ws``).

Every request gets exactly one reply; a reply of the wrong ``type`` is a
[`ProtocolError`][openenv.sync.ProtocolError], never silently returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import jsontext
from .errors import InvalidAction, InvalidActionType, ProtocolError, error_from_frame
from .result import StepResult

__all__ = [
    "encode_reset",
    "encode_step",
    "encode_mcp",
    "STATE_FRAME",
    "CLOSE_FRAME",
    "OBSERVATION",
    "STATE",
    "MCP",
    "decode_reply",
    "parse_step_result",
    "describe_close",
]

OBSERVATION = "observation"
STATE = "state"
MCP = "mcp"

STATE_FRAME = '{"type":"state"}'
CLOSE_FRAME = '{"type":"close"}'

_dumps = jsontext.encoder()
# actions must be strict JSON: NaN/Infinity are not JSON, and servers refuse them
_dumps_strict = jsontext.encoder(allow_nan=False)
_loads = jsontext.loads


def _encode(kind: str, data: Any) -> str:
    try:
        text = _dumps({"type": kind, "data": data})
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot send this {kind} payload as JSON: {exc}") from None
    bad = _unencodable(text)
    if bad is not None:
        raise TypeError(f"cannot send this {kind} payload as JSON: {bad}")
    return text


def _unencodable(text: str) -> str | None:
    """Why ``text`` cannot go out as a WebSocket text frame (UTF-8), or ``None``.

    A lone surrogate (``"\\ud800"``, e.g. from a bad decode with
    ``errors="surrogateescape"``) is a Python ``str`` but no Unicode text: the
    JSON encoder passes it, and websockets' UTF-8 encode would fail inside its
    send, dropping the connection and the episode.  ASCII frames (most) skip the check.
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"it holds {text[exc.start : exc.end]!r}, a lone surrogate: a Python str, but not valid Unicode "
            "(frames are UTF-8 text)"
        )
    return None


def encode_reset(kwargs: Mapping[str, Any]) -> str:
    """The ``reset`` frame; ``kwargs`` are passed to the environment's ``reset``."""
    return _encode("reset", dict(kwargs))


def encode_step(action: Mapping[str, Any]) -> str:
    """The ``step`` frame carrying the action object itself.

    Raises:
        InvalidActionType: ``action`` is not a dict, or holds a value JSON
            cannot carry (a ``set``, an arbitrary object, a non-string key).
        InvalidAction: it holds ``NaN``/``Infinity``, a circular reference, or
            a lone surrogate (a ``str`` that is not valid Unicode).
    """
    if type(action) is not dict and not isinstance(action, Mapping):
        raise InvalidActionType(f"an action payload must be a JSON object (dict), not {type(action).__name__}")
    try:
        text = _dumps_strict({"type": "step", "data": action})
    except TypeError as exc:
        raise InvalidActionType(f"the action cannot be sent as JSON: {exc}") from None
    except ValueError as exc:
        raise InvalidAction(f"the action cannot be sent as JSON: {exc} (NaN and Infinity are not JSON)") from None
    if not text.isascii():  # (most frames are ASCII: no call then)
        bad = _unencodable(text)
        if bad is not None:
            raise InvalidAction(f"the action cannot be sent: {bad}")
    return text


def encode_mcp(request: Mapping[str, Any]) -> str:
    """The ``mcp`` frame carrying a JSON-RPC 2.0 request."""
    return _encode("mcp", request)


def decode_reply(raw: str | bytes, expected: str) -> dict[str, Any]:
    """Check one reply frame and return its ``data`` object.

    Raises:
        ServerError: (a subclass by code) for an ``error`` frame.
        ProtocolError: for a binary or non-JSON frame, a frame that is not an
            object, or a reply whose ``type`` does not answer the request.
    """
    if not isinstance(raw, str):
        raise ProtocolError(f"the server sent a binary frame of {len(raw)} bytes; OpenEnv frames are text")
    try:
        message = _loads(raw)
    except ValueError as exc:  # also: an integer of more than 4300 digits
        raise ProtocolError(f"the server sent a frame that is not JSON ({exc}): {raw[:120]!r}") from None
    except RecursionError:
        raise ProtocolError(f"the server sent a frame nested too deeply to decode: {raw[:120]!r}") from None
    if type(message) is not dict:
        raise ProtocolError(f"the server sent a frame that is not a JSON object: {raw[:120]!r}")
    kind = message.get("type")
    data = message.get("data")
    if kind == expected:
        if type(data) is not dict:
            raise ProtocolError(f"the server's {kind!r} frame has no data object: {raw[:120]!r}")
        return data
    if kind == "error":
        raise error_from_frame(data)
    raise ProtocolError(f"expected a {expected!r} reply, the server sent {kind!r}: {raw[:120]!r}")


def parse_step_result(data: Mapping[str, Any]) -> StepResult[dict[str, Any]]:
    """Turn the ``data`` of an ``observation`` frame into a generic [`StepResult`][openenv.sync.StepResult].

    ``metadata`` is taken from the top level, else from the observation, else
    ``{}`` (0.10 servers omit the top-level key when empty; 0.3 servers send
    none; HTTP replies send ``null``).  ``reward`` becomes a float or ``None``.
    """
    observation = data.get("observation")
    if type(observation) is not dict:
        raise ProtocolError(f"step result without an observation object: {str(data)[:120]}")
    metadata = data.get("metadata")
    if metadata is None:
        metadata = observation.get("metadata")
    if type(metadata) is not dict:
        metadata = {}
    return StepResult(observation, _reward(data.get("reward")), bool(data.get("done", False)), metadata)


def _reward(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ProtocolError(f"reward is not a number: {value!r:.80}") from None
    except OverflowError:  # an integer too large for a float
        raise ProtocolError(f"reward is out of the float range: {str(value)[:80]}...") from None


def describe_close(code: int | None, reason: str) -> str:
    """A readable account of a WebSocket close code."""
    if code is None:
        return "the connection dropped without a close frame"
    text = f"close code {code}" + (f" ({reason})" if reason else "")
    return text
