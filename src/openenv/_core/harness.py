"""OpenEnv's harness sessions over a generated TRL class: the rules (no IO, no OpenEnv import).

``harness_factory`` (``openenv.sync`` / ``openenv.aio``) wraps the class
``environment_factory`` generates in OpenEnv 0.10's ``ResourceSessionFactory``
protocol (``openenv.core.harness``).  What a session's methods answer is
decided here: the reset keywords a task gives, the first messages, the tool
manifest, and what a tool call and the verdict carry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the tool an environment without MCP tools offers (its action's fields as arguments); not ``step``,
#: which OpenEnv's harness reserves (``RESERVED_TOOL_NAMES``: reset, step, state, close)
ACTION_TOOL = "action"

NEEDS_OPENENV = (
    "harness_factory builds OpenEnv's harness sessions (openenv.core.harness, OpenEnv 0.10) and needs that "
    "package: install it beside this one (pip install 'openenv==0.10.0', then this package; CONTRIBUTING, "
    "'Editable installs'), or give TRL/your trainer the class from environment_factory(...) instead"
)


@dataclass(frozen=True)
class ToolEntry:
    """One tool of the manifest: what ``list_tools`` shows and which generated method serves it.

    Attributes:
        name: the tool's name for the model (the MCP tool's own name, or `ACTION_TOOL`).
        description: its description.
        input_schema: the JSON Schema of its arguments.
        method: the generated method's name.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    method: str


def manifest(tools: Sequence[Any], methods: Sequence[Any], action: Mapping[str, Any] | None) -> list[ToolEntry]:
    """The tools a session lists: the server's MCP tools that became methods, else one `ACTION_TOOL`.

    Args:
        tools: the server's MCP tools (objects with ``name``, ``description``, ``input_schema``).
        methods: the generated class's method specs (``MethodSpec``: ``name``, ``tool``, ``description``).
        action: the action's JSON Schema (``GET /schema``), for a class without MCP tools.
    """
    by_name = {tool.name: tool for tool in tools}
    out: list[ToolEntry] = []
    for spec in methods:
        if spec.tool is None:
            schema = dict(action or {"type": "object", "properties": {}})
            properties = {k: v for k, v in dict(schema.get("properties") or {}).items() if k != "metadata"}
            required = [k for k in schema.get("required") or [] if k != "metadata"]
            input_schema: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                input_schema["required"] = required
            out.append(ToolEntry(ACTION_TOOL, spec.description, input_schema, spec.name))
            continue
        tool = by_name.get(spec.tool)
        if tool is None:
            continue
        out.append(ToolEntry(tool.name, tool.description or "", dict(tool.input_schema or {}), spec.name))
    return out


def reset_kwargs(task: Any, seed: int | None, episode_id: str | None) -> dict[str, Any]:
    """The keywords of the session's ``reset``: a task that is a mapping (a dataset row) gives its keys.

    ``seed`` and ``episode_id``, when given, are added (and win over the
    row's); the generated class then forwards only what the server's reset takes.
    """
    kwargs: dict[str, Any] = dict(task) if isinstance(task, Mapping) else {}
    if seed is not None:
        kwargs["seed"] = seed
    if episode_id is not None:
        kwargs["episode_id"] = episode_id
    return kwargs


def initial_messages(task: Any, text: str | None) -> list[dict[str, Any]]:
    """The first messages of a rollout: the task's prompt with the reset's text, as TRL builds them.

    * a task that is a list of messages (or a mapping whose ``prompt`` is
      one, or a string): the reset text is appended to the last user message,
      as TRL appends it (the text starts with a blank line);
    * otherwise (no prompt, or the last message is not a user's with text
      content): the reset text is a user message of its own.
    """
    text = text or ""
    prompt = task.get("prompt") if isinstance(task, Mapping) else task
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt + text}]
    messages: list[dict[str, Any]] = []
    if isinstance(prompt, Sequence):
        messages = [dict(m) for m in prompt if isinstance(m, Mapping)]
    if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), str):
        messages[-1]["content"] = messages[-1]["content"] + text
        return messages
    return [*messages, {"role": "user", "content": text.lstrip()}]


def tool_metadata(reward: float, step_reward: float | None, done: bool) -> dict[str, Any]:
    """A tool result's ``metadata``: the episode's reward so far under ``reward``, as ``verify`` reports it.

    OpenEnv resolves a rollout's reward from the last tool result that carries
    one and checks that ``verify`` agrees (``_resolve_env_reward``); the step's
    own reward is ``step_reward`` (``None``: the call reported none).
    """
    return {"reward": reward, "step_reward": step_reward, "done": done}


def unknown_tool_message(name: str, known: Sequence[str]) -> str:
    """The error for a tool the session does not list."""
    return f"Unknown tool: {name!r}; this session's tools are {', '.join(known) or '(none)'}"
