"""OpenEnv's HTTP routes, without I/O: request bodies in, `HttpReply` out.

What each route answers, for both transports: ``GET /health``, ``/metadata``,
``/schema`` and ``/state`` (`get()`, served by
[`EnvServer`][openenv.server.EnvServer] and the ASGI app), and the stateless
``POST /reset`` and ``/step`` (`reset()`, `step()`) and ``POST /mcp``
(`mcp()`, JSON-RPC: `openenv.server._rpc`), served by the ASGI app only
(`EnvServer` answers them ``501``: `embedded()`, `embedded_with_body()`).

Bad bodies get the ``422`` FastAPI gives the reference server, with its
``detail`` list (`unprocessable()`); an environment that raises gives a
plain-text ``500`` (`INTERNAL_ERROR`).  Every body is strict JSON
(`openenv.server._wire.dumps`).  The routes reach the environment through the
`EnvProtocol` they are given: its factory (`EnvProtocol.with_fresh_env()`),
its descriptions (`EnvProtocol.metadata()`, ...) and, for ``/mcp``, its
session table.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv._core.models import Action

from ._rpc import answer as _rpc_answer
from ._wire import dumps, jsonable, step_result
from .environment import filter_kwargs
from .tools import is_mcp_action, step_observation

if TYPE_CHECKING:
    from .protocol import EnvProtocol

__all__ = [
    "WS_PATH",
    "GET_ROUTES",
    "POST_ROUTES",
    "HttpReply",
    "json_reply",
    "INTERNAL_ERROR",
    "NOT_FOUND",
    "unprocessable",
    "http_step_result",
    "get",
    "reset",
    "step",
    "mcp",
    "embedded",
    "embedded_with_body",
]

logger = logging.getLogger("openenv.server")

WS_PATH = "/ws"
GET_ROUTES = frozenset({"/health", "/metadata", "/schema", "/state"})
POST_ROUTES = frozenset({"/reset", "/step", "/mcp"})


# ----------------------------------------------------------------- HTTP replies


class HttpReply(NamedTuple):
    """An HTTP answer: status, body bytes, content type and extra headers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_reply(status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> HttpReply:
    """A strict-JSON reply (a NaN in the payload raises ``ValueError``)."""
    return HttpReply(status, dumps(payload).encode("utf-8", "backslashreplace"), "application/json", headers)


#: The plain-text ``500`` of a route whose environment (or its factory) raised.
INTERNAL_ERROR = HttpReply(500, b"Internal Server Error", "text/plain; charset=utf-8")
#: ``404`` for a path that is not a route.
NOT_FOUND = HttpReply(404, b'{"detail":"Not Found"}')


def _finite_reward(value: Any) -> Any:
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, (bool, int)):
        return float(value)
    return value


def http_step_result(observation: Any) -> dict[str, Any]:
    """The step result of HTTP ``/reset`` and ``/step`` (0.10's response model).

    As `step_result()`, but the top-level ``metadata`` is always there
    (``null`` when empty) and ``reward`` is a float (or ``null``).
    """
    result = step_result(observation)
    result["reward"] = _finite_reward(result["reward"])
    result["metadata"] = result.get("metadata") or None
    return result


# ------------------------------------------------------------- 422 bodies


def unprocessable(errors: list[dict[str, Any]]) -> HttpReply:
    """The ``422`` FastAPI gives: ``{"detail": errors}`` (sanitised to strict JSON)."""
    return json_reply(422, {"detail": jsonable(errors)})


def _body_errors(exc: ValidationError, prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{**err, "loc": [*prefix, *err["loc"]]} for err in exc.errors(include_url=False)]


class _ResetRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)


class _StepRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    action: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


def _validated_body(
    body: bytes, model: type[BaseModel], *, optional: bool
) -> tuple[dict[str, Any] | None, HttpReply | None]:
    """The JSON object of a request body checked against ``model``, or the ``422`` FastAPI gives."""
    data, error = _json_body(body, optional=optional)
    if error is not None or data is None:
        return None, error
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return None, unprocessable(_body_errors(exc, ("body",)))
    return data, None


def _json_body(body: bytes, *, optional: bool) -> tuple[dict[str, Any] | None, HttpReply | None]:
    """The JSON object of a request body, or the ``422`` FastAPI gives for it."""
    if not body.strip():
        if optional:
            return {}, None
        return None, unprocessable([{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}])
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", 0)
        error = {"type": "json_invalid", "loc": ["body", pos], "msg": "JSON decode error", "input": {}}
        return None, unprocessable([{**error, "ctx": {"error": getattr(exc, "msg", str(exc))}}])
    if not isinstance(data, dict):
        msg = "Input should be a valid dictionary or object to extract fields from"
        return None, unprocessable([{"type": "model_attributes_type", "loc": ["body"], "msg": msg, "input": data}])
    return data, None


# ---------------------------------------------------------------- routes


def get(protocol: EnvProtocol, path: str) -> HttpReply:
    """``GET /health``, ``/metadata``, ``/schema`` or ``/state``; ``404`` for any other path."""
    try:
        if path == "/health":
            return json_reply(200, {"status": "healthy"})
        if path == "/metadata":
            return json_reply(200, protocol.metadata())
        if path == "/schema":
            return json_reply(200, protocol.schemas())
        if path == "/state":
            return json_reply(200, protocol.fresh_state())
    except Exception:
        logger.exception("GET %s failed", path)
        return INTERNAL_ERROR
    return NOT_FOUND


def _internal_error() -> HttpReply:
    return INTERNAL_ERROR


def reset(protocol: EnvProtocol, body: bytes) -> HttpReply:
    """``POST /reset``: a fresh instance, reset with the body's keys (those it accepts), closed."""
    data, error = _validated_body(body, _ResetRequest, optional=True)
    if data is None:
        return error or INTERNAL_ERROR

    def run(env: Any) -> HttpReply:
        try:
            return json_reply(200, http_step_result(env.reset(**filter_kwargs(env.reset, data))))
        except Exception:
            logger.exception("POST /reset failed")
            return INTERNAL_ERROR

    return protocol.with_fresh_env(run, _internal_error)


def step(protocol: EnvProtocol, body: bytes) -> HttpReply:
    """``POST /step``: a fresh (never reset) instance runs ``{"action": ...}``, then is closed."""
    data, error = _validated_body(body, _StepRequest, optional=False)
    if data is None:
        return error or INTERNAL_ERROR
    action_data: dict[str, Any] = data["action"]
    extra = {k: v for k, v in data.items() if k != "action"}

    def run(env: Any) -> HttpReply:
        try:
            if is_mcp_action(env, action_data):
                observation = step_observation(env, action_data)
            else:
                action_type: type[BaseModel] = getattr(env, "action_type", Action)
                try:
                    action = action_type.model_validate(action_data)
                except ValidationError as exc:
                    return unprocessable([dict(err) for err in exc.errors(include_url=False)])
                observation = env.step(action, **filter_kwargs(env.step, extra))
            return json_reply(200, http_step_result(observation))
        except Exception:
            logger.exception("POST /step failed")
            return INTERNAL_ERROR

    return protocol.with_fresh_env(run, _internal_error)


def mcp(protocol: EnvProtocol, body: bytes) -> HttpReply:
    """``POST /mcp``: one JSON-RPC request; always ``200`` with a JSON-RPC response.

    Without ``params.session_id`` a throw-away instance answers; with it,
    that session's environment (through `Session.run()`).
    ``openenv/session/create`` makes a session (it takes a capacity slot),
    ``openenv/session/close`` ends one.
    """
    return HttpReply(200, _rpc_answer(protocol, body).encode("utf-8", "backslashreplace"))


# ------------------------------------------------- the embedded server's answers
#
# EnvServer (websockets) serves ``/ws`` and the GET routes only: these are its
# answers to every other plain HTTP request (a WebSocket upgrade is its own).


def embedded(protocol: EnvProtocol, method: str, path: str) -> HttpReply:
    """`EnvServer`'s answer to an HTTP request without a body: the GET routes, else ``405``/``501``/``404``."""
    if method != "GET":
        if path in GET_ROUTES:
            return json_reply(405, {"detail": "Method Not Allowed"}, (("Allow", "GET"),))
        if path in POST_ROUTES:
            detail = f"{method} {path} is not supported by this server; use the /ws WebSocket"
            return json_reply(501, {"detail": detail})
        return json_reply(404, {"detail": "Not Found"})
    if path in POST_ROUTES:
        return json_reply(405, {"detail": "Method Not Allowed"}, (("Allow", "POST"),))
    return get(protocol, path)


def embedded_with_body(method: str, path: str, *, too_large: bool) -> HttpReply:
    """`EnvServer`'s answer to an HTTP request with a body (it takes none): ``413``, ``501``, ``405``, ``404``."""
    if too_large:
        return json_reply(413, {"detail": f"request body too large; this server takes no request bodies ({path})"})
    if path in POST_ROUTES:
        detail = (
            f"{method} {path} is not supported by this server; use the /ws WebSocket "
            "(or serve the environment with openenv.server.asgi.create_app)"
        )
        return json_reply(501, {"detail": detail})
    if path in GET_ROUTES or path == WS_PATH:
        return json_reply(405, {"detail": "Method Not Allowed"}, (("Allow", "GET"),))
    return json_reply(404, {"detail": "Not Found"})
