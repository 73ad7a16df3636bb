"""MCP JSON-RPC 2.0 as the server speaks it, without I/O: the ``mcp`` frame and ``POST /mcp``.

`openenv.server.tools.handle_rpc` answers ``tools/list`` and ``tools/call``
against one environment.  This module adds what goes around it:

* `mcp_frame()`: the reply to a ``/ws`` ``mcp`` frame, on the session's own
  environment;
* `answer()`: the body of ``POST /mcp`` (`openenv.server._http.mcp`): a
  throw-away instance without ``params.session_id``, that session's
  environment with it, and the production-mode session methods
  ``openenv/session/create`` (a session in the protocol's table, holding a
  capacity slot) and ``openenv/session/close``;
* `rpc_text()`: a response as strict JSON (an unsendable tool result becomes
  a ``-32603`` error, never non-standard JSON).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ._wire import dumps, jsonable
from .tools import handle_rpc

if TYPE_CHECKING:
    from .protocol import EnvProtocol

__all__ = ["rpc_text", "rpc_error", "mcp_frame", "answer"]


def rpc_text(response: dict[str, Any]) -> str:
    """A JSON-RPC response as strict JSON (an unsendable result becomes a ``-32603`` error)."""
    try:
        return dumps(response)
    except (ValueError, TypeError, RecursionError) as exc:
        error = {"code": -32603, "message": f"the environment's tool result cannot be sent as strict JSON: {exc}"}
        return dumps({"jsonrpc": "2.0", "id": jsonable(response.get("id")), "error": error})


def mcp_frame(env: Any, request: dict[str, Any], session_id: str) -> str:
    """Answer an ``mcp`` frame (JSON-RPC 2.0) against the session's environment."""
    return '{"type":"mcp","data":' + rpc_text(handle_rpc(env, request, session_id)) + "}"


def rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}


def answer(protocol: EnvProtocol, body: bytes) -> str:
    """The JSON-RPC response text to one ``POST /mcp`` body (never raises for bad input)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return rpc_text(rpc_error(None, -32700, "Parse error"))
    if not isinstance(request, dict):
        return rpc_text(rpc_error(None, -32600, "Invalid request: not a JSON object"))
    request_id = request.get("id")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    params = request.get("params", {})
    method = request.get("method")
    if not isinstance(params, dict):
        return rpc_text(handle_rpc(None, request, ""))  # the -32600 it gives
    if method == "openenv/session/create" and request.get("jsonrpc") == "2.0":
        return rpc_text(_create(protocol, request_id))
    target = params.get("session_id")
    if method == "openenv/session/close" and request.get("jsonrpc") == "2.0":
        return rpc_text(_close(protocol, request_id, target))
    if target is not None:
        session = protocol.use_session(target)
        if session is None:
            return rpc_text(rpc_error(request_id, -32602, f"Unknown session_id: {target}"))
        sid = session.session_id
        try:
            return rpc_text(session.run(lambda: handle_rpc(session.env, request, sid)))
        finally:
            protocol.done_with(session)

    def failed() -> str:
        return rpc_text(
            rpc_error(request_id, -32000, "Failed to create environment", {"factory_name": protocol.factory_name})
        )

    return protocol.with_fresh_env(lambda env: rpc_text(handle_rpc(env, request, "")), failed)


def _create(protocol: EnvProtocol, request_id: Any) -> dict[str, Any]:
    if not protocol.reserve_slot():
        active = protocol.active_sessions
        message = f"Server at capacity: {active}/{protocol.max_sessions} sessions active. Cannot create session."
        data = {"active_sessions": active, "max_sessions": protocol.max_sessions}
        return rpc_error(request_id, -32000, message, data)

    def failed() -> dict[str, Any]:
        message = f"Environment factory '{protocol.factory_name}' failed to create instance."
        return rpc_error(request_id, -32000, message, {"factory_name": protocol.factory_name})

    env, error = protocol.create_env(failed)
    if error is not None:
        protocol.release_slot()
        return error
    session = protocol.open_http_session(env)
    return {"jsonrpc": "2.0", "id": request_id, "result": {"session_id": session.session_id}}


def _close(protocol: EnvProtocol, request_id: Any, target: Any) -> dict[str, Any]:
    if not target:
        return rpc_error(request_id, -32602, "Invalid params - 'session_id' is required")
    session = protocol.lookup(target) if isinstance(target, str) else None
    if session is None:
        return rpc_error(request_id, -32602, f"Unknown session_id: {target}")
    if session.owner == "ws":
        return rpc_error(request_id, -32600, "Cannot close active WebSocket-managed session via MCP method")
    if not protocol.end_unless_attached(session):
        result = {"session_id": target, "closed": False, "closing": True}
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    return {"jsonrpc": "2.0", "id": request_id, "result": {"session_id": target, "closed": True}}
