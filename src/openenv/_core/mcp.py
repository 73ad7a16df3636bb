"""MCP tools over the OpenEnv protocol, sans-IO (shared by both twins and the server).

Three transports carry the same two methods, ``tools/list`` and ``tools/call``
(JSON-RPC 2.0, as OpenEnv's MCP support speaks it):

* **the step loop** (simulation mode, the default): ``{"type":"call_tool",
  "tool_name":..., "arguments":{...}}`` and ``{"type":"list_tools"}`` actions
  in ordinary ``step`` frames.  These are real steps (the environment counts
  and scores them; they carry ``reward``/``done``).  Clients send every
  ``call_tool`` this way, as OpenEnv's ``MCPToolClient`` does, and
  ``list_tools`` only as a fallback (see below).
* **``mcp`` frames on the session WebSocket** (simulation mode):
  ``{"type":"mcp","data":<JSON-RPC request>}`` answered by ``{"type":"mcp",
  "data":<JSON-RPC response>}`` against the session's own environment.  The
  environment's ``step`` is *not* called: no reward, ``step_count`` unchanged.
  Clients list tools this way; when the server answers ``-32603 Environment
  does not support MCP`` (OpenEnv 0.3.0 with an environment that handles MCP
  actions only in ``step``) they use the ``list_tools`` step action instead.
* **HTTP ``POST /mcp``** (production mode): one JSON-RPC request per call,
  with ``params.session_id`` naming the session.

Everything here is pure: request encoding, reply-id checking, result parsing
and error mapping.  Key spellings differ between server releases (FastMCP 3
dumps ``inputSchema``, FastMCP 4 ``input_schema``; tool results use snake-case
``structured_content``/``is_error``); every spelling is accepted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import ConnectError, InvalidOption, ProtocolError, ToolError, ToolNotFound

if TYPE_CHECKING:
    from .tool_models import Tool, ToolResult

__all__ = [
    "RpcIds",
    "SIMULATION",
    "PRODUCTION",
    "resolve_mode",
    "rpc_request",
    "rpc_result",
    "parse_tools",
    "parse_tool_result",
    "list_tools_action",
    "call_tool_action",
    "parse_step_tools",
    "parse_step_call",
    "is_unsupported",
    "attach_url",
    "LIST_TOOLS",
    "CALL_TOOL",
    "SESSION_CREATE",
    "SESSION_CLOSE",
    "UNSUPPORTED_MESSAGE",
    "RESERVED_TOOL_NAMES",
]

LIST_TOOLS = "tools/list"
CALL_TOOL = "tools/call"
SESSION_CREATE = "openenv/session/create"
SESSION_CLOSE = "openenv/session/close"
UNSUPPORTED_MESSAGE = "Environment does not support MCP"
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})

SIMULATION = "simulation"
PRODUCTION = "production"
MODE_ENV_VAR = "OPENENV_CLIENT_MODE"

# JSON-RPC 2.0 error codes used by OpenEnv's MCP endpoints
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcIds:
    """A per-session JSON-RPC id counter (starts at 1, like OpenEnv's client)."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 1

    def next(self) -> int:
        value = self._next
        self._next += 1
        return value


def resolve_mode(mode: str | None) -> str:
    """``mode`` or ``$OPENENV_CLIENT_MODE``, validated: ``"simulation"`` (default) or ``"production"``.

    Raises:
        InvalidOption: any other value (a ``ValueError`` too).
    """
    raw = mode if mode is not None else os.environ.get(MODE_ENV_VAR, "")
    value = (raw or SIMULATION).strip().lower()
    if value not in (SIMULATION, PRODUCTION):
        source = "mode" if mode is not None else f"${MODE_ENV_VAR}"
        raise InvalidOption(f"{source} must be 'simulation' or 'production', not {raw!r}")
    return value


def rpc_request(method: str, params: Mapping[str, Any] | None, request_id: int) -> dict[str, Any]:
    """A JSON-RPC 2.0 request object."""
    return {"jsonrpc": "2.0", "method": method, "params": dict(params or {}), "id": request_id}


def rpc_result(response: Any, request_id: int, *, tool: str | None = None) -> Any:
    """Check a JSON-RPC response for ``request_id`` and return its ``result``.

    Raises:
        ToolError: (or [`ToolNotFound`][openenv.sync.ToolNotFound]) for an ``error`` response.
        ProtocolError: for a response that is not JSON-RPC, or answers another id.
    """
    if type(response) is not dict:
        raise ProtocolError(f"the server's MCP reply is not a JSON-RPC object: {str(response)[:120]}")
    error = response.get("error")
    reply_id = response.get("id")
    if error is not None:
        # servers answer unparsable requests with id null: accept that for errors only
        if reply_id is not None and reply_id != request_id:
            raise ProtocolError(f"MCP reply id {reply_id!r} does not answer request id {request_id!r}")
        raise tool_error(error, tool)
    if reply_id != request_id:
        raise ProtocolError(f"MCP reply id {reply_id!r} does not answer request id {request_id!r}")
    if "result" not in response:
        raise ProtocolError(f"the server's MCP reply has neither result nor error: {str(response)[:120]}")
    return response["result"]


def tool_error(error: Any, tool: str | None = None) -> ToolError:
    """The exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return ToolError(str(error), code=None, tool=tool)
    code = error.get("code")
    message = str(error.get("message", ""))
    data = error.get("data")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    lowered = message.lower()
    if tool is not None and ("unknown tool" in lowered or "tool not found" in lowered):
        return ToolNotFound(message, code=code, data=data, tool=tool)
    return ToolError(message, code=code, data=data, tool=tool)


def is_unsupported(exc: ToolError) -> bool:
    """Whether the server said the environment has no MCP support (``-32603``)."""
    return exc.code == INTERNAL_ERROR and exc.message == UNSUPPORTED_MESSAGE


def parse_tools(result: Any) -> list[Tool]:
    from .tool_models import Tool

    """The tools of a ``tools/list`` result (``{"tools": [...]}``) or a step observation's list."""
    tools = result.get("tools") if isinstance(result, dict) else result
    if not isinstance(tools, list):
        raise ProtocolError(f"a tools/list result without a tools list: {str(result)[:120]}")
    out = []
    for entry in tools:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ProtocolError(f"a tool entry without a name: {str(entry)[:120]}")
        out.append(Tool.model_validate(entry))
    return out


def parse_tool_result(result: Any, *, reward: float | None = None, done: bool = False) -> ToolResult:
    """A [`ToolResult`][openenv.sync.ToolResult] from a ``tools/call`` result (any key spelling) or a bare value."""
    from .tool_models import ToolResult

    if isinstance(result, dict) and any(
        key in result for key in ("content", "structured_content", "structuredContent", "is_error", "isError")
    ):
        parsed = ToolResult.model_validate(result)
    else:
        # a bare return value (OpenEnv's bare-server path, or a custom server)
        parsed = ToolResult(data=result)
        return parsed.model_copy(update={"reward": reward, "done": done})
    updates: dict[str, Any] = {"reward": reward, "done": done}
    if "data" not in result:
        structured = parsed.structured_content
        if isinstance(structured, dict) and set(structured) == {"result"}:
            updates["data"] = structured["result"]
        elif structured is not None:
            updates["data"] = structured
        elif len(parsed.texts) == 1:
            updates["data"] = parsed.texts[0]
    return parsed.model_copy(update=updates)


def list_tools_action() -> dict[str, Any]:
    """The step-loop action that lists tools."""
    return {"type": "list_tools"}


def call_tool_action(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The step-loop action that calls a tool."""
    return {"type": "call_tool", "tool_name": name, "arguments": dict(arguments)}


def parse_step_tools(observation: Any) -> list[Tool]:
    """The tools of a ``list_tools`` step observation (``{"tools": [...]}``)."""
    if not isinstance(observation, dict) or "tools" not in observation:
        raise ProtocolError(f"the list_tools step returned no tools: {str(observation)[:120]}")
    return parse_tools(observation["tools"])


_STEP_ERROR_CODES = {"tool_not_found": INVALID_PARAMS, "invalid_args": INVALID_PARAMS}


def parse_step_call(
    observation: Any, name: str, *, reward: float | None = None, done: bool = False, result: Any = None
) -> ToolResult:
    """The result of a ``call_tool`` step observation (``{"tool_name", "result", "error"}``).

    Args:
        observation: the step's observation.
        name: the tool's name.
        reward: the step's reward (kept on the result, or on the error).
        done: the step's done flag (likewise).
        result: the whole step result, kept on a raised error as ``ToolError.result``.

    Raises:
        ToolError: ([`ToolNotFound`][openenv.sync.ToolNotFound] for ``tool_not_found``) when the
            observation carries an ``error`` object; ``data`` holds it, and
            ``reward``/``done``/``result`` the step's (the failed call was a step).
    """
    if not isinstance(observation, dict):
        raise ProtocolError(f"the call_tool step returned no observation object: {str(observation)[:120]}")
    error = observation.get("error")
    if error:
        kind = error.get("error_type") if isinstance(error, dict) else None
        message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
        cls = ToolNotFound if kind == "tool_not_found" else ToolError
        code = _STEP_ERROR_CODES.get(str(kind), INTERNAL_ERROR)
        raise cls(message, code=code, data=error, tool=name, reward=reward, done=done, result=result)
    if "result" not in observation:
        raise ProtocolError(f"the call_tool step returned no result: {str(observation)[:120]}")
    return parse_tool_result(observation["result"], reward=reward, done=done)


def attach_url(ws_url: str, session_id: str) -> str:
    """The ``/ws`` URL that attaches to an existing session (``?session_id=``, other query kept)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(ws_url)
    query: list[tuple[str, str]] = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "session_id"
    ]
    query.append(("session_id", session_id))
    return urlunsplit(parts._replace(query=urlencode(query)))


def session_id_of(result: Any) -> str:
    """The ``session_id`` of an ``openenv/session/create`` result."""
    sid = result.get("session_id") if isinstance(result, dict) else None
    if not isinstance(sid, str) or not sid:
        raise ProtocolError(f"openenv/session/create returned no session_id: {str(result)[:120]}")
    return sid


class McpState:
    """Per-session MCP bookkeeping of a client (reset by ``new_session``)."""

    __slots__ = ("ids", "session_id", "owned", "attach", "via_step", "http")

    def __init__(self) -> None:
        self.ids = RpcIds()
        #: production mode: the session the HTTP calls name (``params.session_id``)
        self.session_id: str | None = None
        #: whether we created it over HTTP (and so close it with openenv/session/close)
        self.owned = False
        #: whether ``/ws?session_id=`` attaches (False after a server ignored it: 0.3.0)
        self.attach = True
        #: simulation mode: the server answers tools only through the step loop
        self.via_step = False
        #: the HTTP client of production mode (created on first use)
        self.http: Any = None


def http_json(status: int, body: bytes, url: str, secrets: Iterable[str] = ()) -> Any:
    """The JSON body of an HTTP answer, or a [`ProtocolError`][openenv.sync.ProtocolError] saying what came instead.

    An excerpt of the body is shown with each of ``secrets`` (the client's
    header values, the URL's password and query values:
    ``ClientOptions.scrub``) hidden, since a server may echo the request.
    """
    import json

    from .urls import scrub

    hidden = list(secrets)

    def excerpt(limit: int) -> str:
        return scrub(repr(body[:limit]), hidden)

    if status == 404:
        raise ProtocolError(f"{url} answered HTTP 404: the server has no such endpoint")
    if status == 501:
        raise ConnectError(
            f"{url} answered HTTP 501 (not implemented: {excerpt(160)}); the embedded openenv.server "
            "EnvServer serves only the /ws WebSocket, so production mode (POST /mcp) does not work "
            "against it: use mode='simulation', or serve the environment with "
            "openenv.server.asgi.create_app (`openenv serve --asgi`)"
        )
    if status != 200:
        raise ProtocolError(f"{url} answered HTTP {status}: {excerpt(200)}")
    try:
        return json.loads(body)
    except ValueError:
        raise ProtocolError(f"{url} answered with a body that is not JSON: {excerpt(120)}") from None


__all__ += ["McpState", "http_json", "session_id_of", "tool_error"]
