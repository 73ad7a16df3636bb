"""MCP tools for environments served by `openenv.server.app`.

Mark environment methods with [`tool()`][openenv.server.tool]; the server then answers MCP
requests for them, the way OpenEnv's ``MCPEnvironment`` does (JSON-RPC 2.0):

* JSON-RPC ``tools/list`` / ``tools/call`` in ``mcp`` frames on ``/ws``,
  against the connection's own environment instance.  These do not call the
  environment's ``step``: no reward, ``step_count`` unchanged.
* the step-loop actions ``{"type": "list_tools"}`` and ``{"type": "call_tool",
  "tool_name": ..., "arguments": {...}}`` in ``step`` frames, when the
  environment's action model has no ``type`` field of its own.  They are
  handed to the environment's [`step_tool()`][openenv.server.Environment.step_tool]
  as a `ListToolsAction` / `CallToolAction` (it runs the tool;
  override it to count the step or to score the call).  The reply is an
  ordinary step result whose observation carries ``tools`` or
  ``tool_name``/``result``/``error``, with the ``reward`` and ``done`` that
  ``step_tool`` set (by default ``null`` and ``false``).  This is the path
  clients take for ``call_tool`` in simulation mode, as OpenEnv's
  ``MCPToolClient`` does.

**Example**

```python
from openenv.server import Environment, tool

class Calculator(Environment):
    ...
    @tool
    def add(self, a: int, b: int) -> int:
        "Add two integers."
        return a + b
```

Each tool's input schema is built from its type hints with pydantic, and its
arguments are validated with it before the method is called.  Results have the
shape FastMCP gives through OpenEnv (snake-case keys, as its ``tools/call`` returns them):

```python
{"content": [{"type": "text", "text": "5", "annotations": null, "meta": null}],
 "structured_content": {"result": 5}, "meta": {"fastmcp": {"wrap_result": true}},
 "data": 5, "is_error": false}
```

Not served (see `openenv.server.app`): ``POST /mcp`` (answered ``501``,
so clients in production mode cannot use this server) and the WebSocket
``/mcp`` endpoint.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_jsonable_python

from openenv._core.mcp import (
    CALL_TOOL,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LIST_TOOLS,
    METHOD_NOT_FOUND,
    RESERVED_TOOL_NAMES,
    SESSION_CLOSE,
    SESSION_CREATE,
    UNSUPPORTED_MESSAGE,
)
from openenv._core.models import Action, Observation

__all__ = [
    "tool",
    "ToolSpec",
    "tools_of",
    "handle_rpc",
    "is_mcp_action",
    "step_observation",
    "tool_action",
    "run_tool_action",
    "ListToolsAction",
    "CallToolAction",
    "ListToolsObservation",
    "CallToolObservation",
]

F = TypeVar("F", bound=Callable[..., Any])

_TOOL_ATTR = "__openenv_tool__"


def tool(func: F | None = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Mark an environment method as an MCP tool (``@tool`` or ``@tool(name=..., description=...)``).

    The tool's name defaults to the method's name, its description to the
    docstring; ``reset``, ``step``, ``state`` and ``close`` are reserved.
    """

    def mark(fn: F) -> F:
        tool_name = name or fn.__name__
        if tool_name in RESERVED_TOOL_NAMES:
            raise ValueError(f"tool name {tool_name!r} is reserved ({sorted(RESERVED_TOOL_NAMES)})")
        setattr(fn, _TOOL_ATTR, (tool_name, description))
        return fn

    return mark(func) if func is not None else mark


@dataclass(frozen=True)
class ToolSpec:
    """One tool of an environment class."""

    name: str
    description: str
    attribute: str
    arguments: type[BaseModel]
    input_schema: dict[str, Any]

    def listing(self, *, snake: bool) -> dict[str, Any]:
        key = "input_schema" if snake else "inputSchema"
        return {"name": self.name, "description": self.description, key: self.input_schema}


def _spec(attribute: str, fn: Callable[..., Any], name: str, description: str | None) -> ToolSpec:
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to Any
        hints = {}
    fields: dict[str, Any] = {}
    params = list(sig.parameters.values())[1:]  # drop self
    for param in params:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model_name = "".join(part.capitalize() for part in name.split("_")) + "Arguments"
    arguments = create_model(
        model_name,
        __config__=ConfigDict(extra="forbid", protected_namespaces=()),
        **fields,
    )
    schema = arguments.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    doc = description if description is not None else inspect.getdoc(fn) or ""
    return ToolSpec(name, doc, attribute, arguments, schema)


@functools.lru_cache(maxsize=128)
def _class_tools(cls: type) -> dict[str, ToolSpec]:
    found: dict[str, ToolSpec] = {}
    for attribute in dir(cls):
        member = inspect.getattr_static(cls, attribute, None)
        fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        marker = getattr(fn, _TOOL_ATTR, None)
        if marker is None or not callable(fn):
            continue
        name, description = marker
        if name in found:
            raise ValueError(f"{cls.__name__} defines the tool {name!r} twice")
        found[name] = _spec(attribute, fn, name, description)
    return found


def tools_of(env: Any) -> dict[str, ToolSpec]:
    """The tools of an environment instance (by its class), by name."""
    return _class_tools(type(env))  # type: ignore[arg-type, unused-ignore]


# ------------------------------------------------------------------ results


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value), separators=(",", ":"), ensure_ascii=False)


def tool_result(value: Any) -> dict[str, Any]:
    """The ``tools/call`` result object for a tool's return value (FastMCP's shape, snake case)."""
    data = to_jsonable_python(value)
    wrap = not isinstance(data, dict)
    return {
        "content": []
        if value is None
        else [{"type": "text", "text": _text_of(value), "annotations": None, "meta": None}],
        "structured_content": {"result": data} if wrap else data,
        "meta": {"fastmcp": {"wrap_result": True}} if wrap else None,
        "data": data,
        "is_error": False,
    }


class ToolCallError(Exception):
    """A tool call failed: ``kind`` is the step-loop ``error_type``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def call(env: Any, name: str, arguments: Any) -> dict[str, Any]:
    """Run one tool call and return its result object.

    Raises:
        ToolCallError: unknown tool (``tool_not_found``), bad arguments
            (``invalid_args``) or the tool raised (``execution_error``).
    """
    spec = tools_of(env).get(name)
    if spec is None:
        raise ToolCallError("tool_not_found", f"Unknown tool: '{name}'")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolCallError("invalid_args", f"Error calling tool '{name}': arguments must be an object")
    try:
        validated = spec.arguments.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ToolCallError("invalid_args", f"Error calling tool '{name}': {problems}") from None
    kwargs = {key: getattr(validated, key) for key in type(validated).model_fields}
    try:
        value = getattr(env, spec.attribute)(**kwargs)
    except Exception as exc:
        raise ToolCallError("execution_error", f"Error calling tool '{name}': {exc}") from exc
    return tool_result(value)


# ------------------------------------------------------------------ JSON-RPC

_REQUEST_KEYS = frozenset({"jsonrpc", "method", "params", "id"})


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}


def handle_rpc(env: Any, request: dict[str, Any], session_id: str) -> dict[str, Any]:
    """Answer one JSON-RPC request of an ``mcp`` frame against ``env`` (never raises)."""
    request_id = request.get("id")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    extra = sorted(set(request) - _REQUEST_KEYS)
    method = request.get("method")
    params = request.get("params", {})
    if request.get("jsonrpc") != "2.0" or not isinstance(method, str) or extra or not isinstance(params, dict):
        why = (
            f"unexpected keys {extra}"
            if extra
            else "params must be an object"
            if not isinstance(params, dict)
            else "'jsonrpc' must be '2.0' and 'method' a string"
        )
        return _error(request_id, INVALID_REQUEST, f"Invalid request: {why}")
    if method == SESSION_CREATE:
        return {"jsonrpc": "2.0", "id": request_id, "result": {"session_id": session_id}}
    if method == SESSION_CLOSE:
        target = params.get("session_id")
        if not target:
            return _error(request_id, INVALID_PARAMS, "Invalid params - 'session_id' is required")
        if target == session_id:
            return _error(request_id, INVALID_REQUEST, "Cannot close active WebSocket-managed session via MCP method")
        return _error(request_id, INVALID_PARAMS, f"Unknown session_id: {target}")
    if method not in (LIST_TOOLS, CALL_TOOL):
        return _error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
    tools = tools_of(env)
    if not tools:
        return _error(request_id, INTERNAL_ERROR, UNSUPPORTED_MESSAGE)
    if method == LIST_TOOLS:
        listing = [spec.listing(snake=False) for spec in tools.values()]
        return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": listing}}
    name = params.get("name")
    if not isinstance(name, str) or not name:
        return _error(request_id, INVALID_PARAMS, "Invalid params - 'name' is required")
    try:
        result = call(env, name, params.get("arguments", {}))
    except ToolCallError as exc:
        return _error(request_id, INTERNAL_ERROR, exc.message)
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


# ------------------------------------------------------------------ step loop


class ListToolsAction(Action):
    """The step-loop action ``{"type": "list_tools"}``."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow")

    type: str = "list_tools"


class CallToolAction(Action):
    """The step-loop action ``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``.

    Validated loosely, as OpenEnv does: a missing or malformed ``tool_name`` or
    ``arguments`` becomes an ``invalid_args`` error in the observation, not a
    ``VALIDATION_ERROR`` frame.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow")

    type: str = "call_tool"
    tool_name: Any = None
    arguments: Any = Field(default_factory=dict)


class ListToolsObservation(Observation):
    """The observation of a ``list_tools`` step: the tools with snake-case ``input_schema``."""

    tools: list[dict[str, Any]] = Field(default_factory=list)


class CallToolObservation(Observation):
    """The observation of a ``call_tool`` step: ``result`` (FastMCP's shape) or ``error``.

    ``error`` is ``{"error_type": "tool_not_found" | "invalid_args" |
    "execution_error", "message": ...}`` when the call failed.
    """

    tool_name: Any = None
    result: Any = None
    error: dict[str, Any] | None = None


def tool_action(data: dict[str, Any]) -> ListToolsAction | CallToolAction:
    """The action model of a step-loop MCP action (see `is_mcp_action()`)."""
    if data.get("type") == "list_tools":
        return ListToolsAction.model_construct(**data)
    fields = {key: value for key, value in data.items() if key != "arguments"}
    arguments = data.get("arguments", {})
    return CallToolAction.model_construct(**fields, arguments={} if arguments is None else arguments)


def run_tool_action(env: Any, action: ListToolsAction | CallToolAction) -> Observation:
    """Run a step-loop MCP action against ``env`` (what ``Environment.step_tool`` does by default).

    Never raises for a failed call: the observation's ``error`` says what went wrong.
    """
    if isinstance(action, ListToolsAction) or getattr(action, "type", None) == "list_tools":
        return ListToolsObservation(tools=[spec.listing(snake=True) for spec in tools_of(env).values()])
    name = getattr(action, "tool_name", None)
    observation = CallToolObservation(tool_name=name)
    try:
        if not isinstance(name, str) or not name:
            raise ToolCallError("invalid_args", "call_tool needs a tool_name")
        observation.result = call(env, name, getattr(action, "arguments", {}))
    except ToolCallError as exc:
        observation.error = {"error_type": exc.kind, "message": exc.message}
    return observation


def is_mcp_action(env: Any, data: dict[str, Any]) -> bool:
    """Whether a ``step`` frame's data is an MCP action this environment handles."""
    if data.get("type") not in ("list_tools", "call_tool") or not tools_of(env):
        return False
    action_type = getattr(env, "action_type", None)
    fields = getattr(action_type, "model_fields", {})
    return "type" not in fields


def step_observation(env: Any, data: dict[str, Any]) -> Observation:
    """The observation of an MCP step-loop action: ``env.step_tool(action)`` when it has one.

    Environments that are not [`Environment`][openenv.server.Environment] subclasses
    (no ``step_tool``) get `run_tool_action()`.
    """
    action = tool_action(data)
    hook = getattr(env, "step_tool", None)
    if callable(hook):
        observation: Observation = hook(action)
        return observation
    return run_tool_action(env, action)
