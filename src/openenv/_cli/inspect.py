"""``schema`` and ``tools``: what an environment declares about itself."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ._common import _add_target, _CapacityWait, _fetch_schema, _hint, _Out, _prog, _session, _status, _target_words

T = TypeVar("T")

_PARTS = ("action", "observation", "state")


def _plain(text: str) -> str:
    """A docstring's reST or Markdown markup as plain text: ``name`` -> name, a Sphinx role's target, **b** -> b."""
    import re

    text = re.sub(r":(?:py:)?[a-z]+:`~?([^`]+)`", r"\1", text)  # a Sphinx role (class, meth, ...) -> its target
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`(?:_)?", r"\1", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"\1", text)


def _how(field: Any) -> str:
    from openenv._core.defaults import MISSING

    if field.required:
        return "required"
    if field.default is MISSING:
        return "optional"
    return f"default {json.dumps(field.default, default=str)}"


def _print_fields(schema: dict[str, Any], indent: str) -> None:
    from openenv._core.defaults import describe_fields

    fields = describe_fields(schema)
    if not fields:
        print(f"{indent}(no fields)")
        return
    width = max(len(f.name) for f in fields)
    type_width = min(max(len(f.type) for f in fields), 40)
    for f in fields:
        line = f"{indent}{f.name:<{width}}  {f.type:<{type_width}}  [{_how(f)}]"
        if f.description:
            line += f"  {_plain(f.description.splitlines()[0])}"
        print(line)


def _read(
    args: argparse.Namespace, out: _Out, read: Callable[[Any], T], *, connect: bool = True
) -> tuple[T | None, int | None]:
    """``read(env)`` on a client of the command's target: ``(value, None)``, or ``(None, exit status)`` once said.

    ``connect=False``: for a server URL, a client that opens no session (``read`` uses HTTP only).
    """
    from openenv._core.errors import OpenEnvError

    wait = _CapacityWait(args, out)
    try:
        with _session(args, out, wait, connect=connect) as env:
            return wait(lambda: read(env)), None
    except (OpenEnvError, OSError) as exc:
        out.error(exc)
        hint = _hint(exc, args)
        if hint:
            print(hint, file=sys.stderr)
        return None, _status(exc)


def _cmd_schema(args: argparse.Namespace) -> int:
    from openenv._core.defaults import NoDefault, default_value

    out = _Out(args.json)
    schema, code = _read(args, out, _fetch_schema, connect=False)
    if schema is None:
        return code or 1
    if args.json:
        print(json.dumps(schema, indent=2, ensure_ascii=False))
        return 0
    for part in _PARTS:
        node = schema.get(part)
        if not isinstance(node, dict):
            print(f"{part}: (not published)")
            continue
        title = node.get("title")
        print(f"{part}{f' ({title})' if title else ''}:")
        if node.get("description"):
            print(f"  {_plain(str(node['description']).splitlines()[0])}")
        _print_fields(node, "  ")
        defs = node.get("$defs") or node.get("definitions") or {}
        for name, sub in defs.items() if isinstance(defs, dict) else ():
            if isinstance(sub, dict) and "properties" in sub:
                print(f"  where {name}:")
                _print_fields({**sub, "$defs": defs}, "    ")
            elif isinstance(sub, dict):
                from openenv._core.defaults import describe_type

                print(f"  where {name}: {describe_type(sub)}")
        if part == "action":
            try:
                example = default_value(node)
                print(f"  default action: {json.dumps(example, ensure_ascii=False)}")
            except NoDefault as exc:
                needed = ", ".join(exc.needs) or "(the action)"
                print(f"  no default action (needs a value for: {needed})")
    return 0


def _tool_record(tool: Any) -> dict[str, Any]:
    record = tool.model_dump(mode="json", exclude_none=True)
    record["inputSchema"] = record.pop("input_schema", {})
    if "output_schema" in record:
        record["outputSchema"] = record.pop("output_schema")
    return dict(record)


def _cmd_tools(args: argparse.Namespace) -> int:
    import shlex

    from openenv._core.defaults import MISSING, NoDefault, default_value, describe_fields

    from .run import _tools_of

    out = _Out(args.json)
    tools, code = _read(args, out, _tools_of)
    if tools is None:
        return code or 1
    if args.json:
        print(json.dumps([_tool_record(t) for t in tools], indent=2, ensure_ascii=False))
        return 0
    if not tools:
        print("this environment has no MCP tools (run sends it actions: see the schema command)")
        return 0
    for tool in tools:
        description = (tool.description or "").strip().splitlines()
        print(f"{tool.name}: {_plain(description[0]) if description else '(no description)'}")
        params = describe_fields(tool.input_schema)
        for p in params:
            how = (
                "required"
                if p.required
                else ("optional" if p.default is MISSING else f"default {json.dumps(p.default)}")
            )
            line = f"    {p.name}: {p.type} [{how}]"
            if p.description:
                line += f"  {_plain(p.description.splitlines()[0])}"
            print(line)
        if not params:
            print("    (no parameters)")
    first = tools[0]
    try:
        example = default_value(first.input_schema or {"type": "object"})
    except NoDefault as exc:
        example = exc.example
    print(
        f"call one: {_prog()} run{_target_words(args)} --tool {shlex.quote(first.name)} "
        f"--args {shlex.quote(json.dumps(example, ensure_ascii=False))}"
    )
    return 0


_SCHEMA_EPILOG = """\
Prints the action, observation and state JSON Schemas of GET /schema as field
lists (type, required or default, description) and the default action that
`run` would send; --json prints the raw schema object.

examples:
  %(prog)s                # the built-in echo environment
  %(prog)s http://127.0.0.1:8000
  %(prog)s my-env:latest --json | jq .action
"""


_TOOLS_EPILOG = """\
Lists the environment's MCP tools: name, description, and each parameter with
its type and whether it is required; --json prints the raw tool list (MCP
spelling: name, description, inputSchema, ...). Then shows how to call one
with `run --tool`.

Without TARGET, it lists the tools of the built-in tool environment
(openenv.server.tools_demo, the one `run` demonstrates), served in-process.

examples:
  %(prog)s                # the built-in tool environment's tools
  %(prog)s http://127.0.0.1:8001
  %(prog)s my-env:latest --json
"""


def add_parser(commands: Any, raw: type[argparse.HelpFormatter]) -> None:
    """The ``schema`` and ``tools`` commands."""
    p_schema = commands.add_parser(
        "schema",
        help="print an environment's action, observation and state schemas",
        description="Start or connect to an environment and print its GET /schema.",
        epilog=_SCHEMA_EPILOG,
        formatter_class=raw,
    )
    _add_target(p_schema)
    p_schema.add_argument("--json", action="store_true", help="print the raw JSON Schemas")
    p_schema.set_defaults(func=_cmd_schema)

    p_tools = commands.add_parser(
        "tools",
        help="list an environment's MCP tools and their parameters",
        description="Start or connect to an environment and list its MCP tools.",
        epilog=_TOOLS_EPILOG,
        formatter_class=raw,
    )
    _add_target(p_tools)
    p_tools.add_argument("--json", action="store_true", help="print the raw tool list as JSON")
    p_tools.set_defaults(func=_cmd_tools, demo="tools")
