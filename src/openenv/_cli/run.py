"""``run``: reset an environment, step it with actions, call its tools."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from ._common import (
    _add_target,
    _CapacityWait,
    _fetch_schema,
    _hint,
    _integer,
    _jsonable,
    _load_object,
    _num,
    _Out,
    _positive_or_zero,
    _prog,
    _session,
    _short,
    _status,
    _target_words,
    _UsageError,
)

_DEFAULT_STEPS = 5


class _AppendOp(argparse.Action):
    """``--action``, ``--tool`` and ``--args`` all land, in command-line order, in ``ops``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        ops: list[list[Any]] = list(getattr(namespace, "ops", None) or [])
        if option_string == "--args":
            if not ops or ops[-1][0] != "tool" or ops[-1][2] is not None:
                parser.error("--args must follow its --tool NAME (one --args per --tool)")
            ops[-1][2] = values
        elif option_string == "--tool":
            ops.append(["tool", values, None])
        else:
            ops.append(["action", values, None])
        namespace.ops = ops


#: one entry of a plan: (kind, value, arguments, count): ``count`` repeats of one op, so a plan's
#: size never grows with ``--steps`` (``run --steps 100000000`` holds a few tuples, not 10^8)
_Op = tuple[str, Any, Any, int]


def _plan(args: argparse.Namespace) -> tuple[list[_Op], int]:
    """The ops to run in order (``("action", dict|None, _, n)``: ``None`` = the default action) and their step count."""
    ops: list[_Op] = []
    for kind, value, extra in args.ops or []:
        if kind == "action":
            ops.append(("action", _load_object(value, "--action"), None, 1))
        else:
            arguments = {} if extra is None else _load_object(extra, "--args")
            ops.append(("tool", value, arguments, 1))
    actions = [op for op in ops if op[0] == "action"]
    steps = args.steps
    if steps is None:
        if not ops:
            ops = [("action", None, None, _DEFAULT_STEPS)]
    elif not actions:
        ops = [("action", None, None, steps), *ops] if steps else ops
    elif len(actions) == 1:
        ops = [(k, v, a, steps) if k == "action" else (k, v, a, n) for k, v, a, n in ops]
    elif steps <= len(actions):
        kept, seen = [], 0
        for op in ops:
            if op[0] == "action":
                seen += 1
                if seen > steps:
                    continue
            kept.append(op)
        ops = kept
    else:
        raise _UsageError(
            f"--steps {steps} but {len(actions)} --action values were given; give one --action to repeat it, "
            f"or one --action per step"
        )
    return ops, _step_count(ops)


def _step_count(ops: list[_Op]) -> int:
    return sum(op[3] for op in ops if op[0] == "action")


def _reset_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs = {} if args.reset_kwargs is None else _load_object(args.reset_kwargs, "--reset-kwargs")
    if args.seed is not None:
        kwargs["seed"] = args.seed
    return kwargs


def _default_action(env: Any, args: argparse.Namespace) -> Callable[[int], dict[str, Any]]:
    """The action of a step that has no ``--action``: built from the action schema.

    Raises:
        _NoAction: no valid action can be built (the message says what to give).
    """
    import shlex

    from openenv._core.defaults import NoDefault, default_value
    from openenv._core.errors import OpenEnvError

    if args.target is None:
        return lambda n: {"message": f"hello {n}"}
    try:
        schema = _fetch_schema(env)
    except OpenEnvError as exc:
        raise _NoAction(
            f"no --action was given and the action schema cannot be read ({exc}); give actions with "
            f"--action JSON ({_prog()} run{_target_words(args)} --action '{{...}}')"
        ) from None
    action_schema = schema.get("action")
    if not isinstance(action_schema, dict):
        raise _NoAction(
            f"the server's /schema has no action schema; give actions with --action JSON "
            f"({_prog()} run{_target_words(args)} --action '{{...}}')"
        )
    try:
        action = default_value(action_schema)
    except NoDefault as exc:
        fields = "\n".join(f"  {path or '(the action)'}: {need}" for path, need in exc.needs.items())
        example = shlex.quote(json.dumps(exc.example, ensure_ascii=False))
        raise _NoAction(
            f"cannot build a default action from the environment's action schema; "
            f"these fields need a value:\n{fields}\n"
            f"give the action with --action, e.g.:\n"
            f"  {_prog()} run{_target_words(args)} --action {example}"
        ) from None
    if not isinstance(action, dict):
        raise _NoAction(f"the action schema does not describe an object (built {action!r}); give --action JSON")
    return lambda n: action


def _each(ops: list[_Op]) -> Iterator[tuple[str, Any, Any]]:
    """Every op of a plan, one at a time (its repeats made as they are needed)."""
    for kind, value, arguments, count in ops:
        for _ in range(count):
            yield kind, value, arguments


class _NoAction(Exception):
    """No default action (exit status 2)."""


def _tools_of(env: Any) -> list[Any]:
    """The environment's MCP tools; ``[]`` when it has none.

    "None" is what the server says (no MCP support, no such method), or a
    server whose answer to ``list_tools`` is not an MCP answer at all.
    """
    from openenv._core import mcp
    from openenv._core.errors import ProtocolError, ToolError

    try:
        return list(env.list_tools())
    except ToolError as exc:
        if mcp.is_unsupported(exc) or exc.code == mcp.METHOD_NOT_FOUND:
            return []
        raise
    except ProtocolError:  # not an MCP server; the client reconnects on reset
        return []


def _check_tools(tools: list[Any], ops: list[_Op], args: argparse.Namespace) -> None:
    """Refuse ``--tool NAME`` on an environment without tools, or a NAME it does not have (exit status 2)."""
    from openenv._core.cli import did_you_mean

    names = [tool.name for tool in tools]
    for kind, name, _, _ in ops:
        if kind != "tool":
            continue
        if not names:
            raise _UsageError(
                f"--tool {name}: this environment has no MCP tools; send actions with --action JSON "
                f"({_prog()} schema{_target_words(args)} shows the action schema)"
            )
        if name not in names:
            raise _UsageError(
                f"--tool {name}: this environment has no tool {name!r}{did_you_mean(name, names)}; "
                f"its tools: {', '.join(names)} ({_prog()} tools{_target_words(args)} shows their parameters)"
            )


def _tool_steps(tools: list[Any], ops: list[_Op], args: argparse.Namespace, out: _Out) -> list[_Op]:
    """An MCP environment's default steps: each becomes a call of a tool whose arguments the schema gives.

    Raises:
        _NoAction: no tool's arguments can be built (the message says which ``--tool`` to pass).
    """
    import shlex

    from openenv._core.cli import pick_tool
    from openenv._core.defaults import NoDefault, default_value

    names = ", ".join(tool.name for tool in tools)
    chosen = pick_tool(tools)
    if chosen is None:
        first = tools[0]
        try:
            example = default_value(first.input_schema or {"type": "object"})
        except NoDefault as exc:
            example = exc.example
        raise _NoAction(
            f"this environment has MCP tools ({names}) and no tool's arguments can be built from its schema; "
            f"call one with --tool NAME --args JSON, e.g.:\n"
            f"  {_prog()} run{_target_words(args)} --tool {shlex.quote(first.name)} "
            f"--args {shlex.quote(json.dumps(example, ensure_ascii=False))}"
        )
    tool, arguments = chosen
    shown = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in arguments.items())
    out.record(
        {"type": "tools", "tools": [t.name for t in tools], "calling": tool.name, "arguments": arguments},
        f"tools: {names}; no --action or --tool given, so each step calls {tool.name}({shown}) "
        f"(choose with --tool NAME --args JSON)",
    )
    return [("tool", tool.name, dict(arguments), op[3]) if op[0] == "action" and op[1] is None else op for op in ops]


def _cmd_run(args: argparse.Namespace) -> int:
    from openenv._core.cli import observation_error, plural
    from openenv._core.errors import OpenEnvError

    out = _Out(args.json)
    try:
        ops, step_count = _plan(args)
        reset_kwargs = _reset_kwargs(args)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    where = ""
    # without a target, --tool calls go to the built-in tool environment (the echo has no tools)
    args.demo = "tools" if any(op[0] == "tool" for op in ops) else "echo"
    wait = _CapacityWait(args, out)
    try:
        with _session(args, out, wait) as env:
            default: Callable[[int], dict[str, Any]] | None = None
            wants_default = any(op[0] == "action" and op[1] is None for op in ops)
            try:
                if (args.target is not None and wants_default) or any(op[0] == "tool" for op in ops):
                    where = "list tools: "
                    tools = wait(lambda: _tools_of(env))
                    where = ""
                    _check_tools(tools, ops, args)
                    if wants_default and tools:
                        ops = _tool_steps(tools, ops, args, out)
                        wants_default = False
                if wants_default:
                    default = _default_action(env, args)
                    if args.target is not None:  # say where the action comes from, and what it is
                        action = default(1)
                        out.record(
                            {"type": "default_action", "action": action, "from": "schema"},
                            f"no --action given: each step sends {json.dumps(action, ensure_ascii=False)}, "
                            f"built from the environment's action schema (GET /schema; "
                            f"{_prog()} schema{_target_words(args)} shows it); choose with --action JSON",
                        )
            except _NoAction as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            step_count = _step_count(ops)
            where = "reset: "
            result = wait(lambda: env.reset(**reset_kwargs))
            out.record(
                {
                    "type": "reset",
                    "observation": _jsonable(result.observation),
                    "reward": result.reward,
                    "done": result.done,
                },
                f"reset: observation={_short(result.observation)} reward={_num(result.reward)} done={result.done}",
            )
            # counts and sums, not lists: memory does not grow with --steps
            steps_done, steps_time, calls_done, calls_time = 0, 0.0, 0, 0.0
            done = False
            for kind, value, arguments in _each(ops):
                if kind == "action":
                    n = steps_done + 1
                    where = f"step {n}: "
                    action = value if value is not None else default(n)  # type: ignore[misc]
                    start = time.perf_counter()
                    result = env.step(action)
                    steps_done, steps_time = n, steps_time + time.perf_counter() - start
                    done = bool(result.done)
                    out.record(
                        {
                            "type": "step",
                            "step": n,
                            "action": action,
                            "observation": _jsonable(result.observation),
                            "reward": result.reward,
                            "done": result.done,
                        },
                        f"step {n}: action={_short(action, 80)} observation={_short(result.observation)} "
                        f"reward={_num(result.reward)} done={result.done}",
                    )
                    failed = observation_error(_jsonable(result.observation))
                    if failed is not None:
                        out.error(RuntimeError(f"the environment reported an error: {failed}"), where)
                        return 1
                else:
                    shown = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in arguments.items())
                    where = f"tool {value}({shown}): "
                    start = time.perf_counter()
                    tool = env.call_tool(value, **arguments)
                    calls_done, calls_time = calls_done + 1, calls_time + time.perf_counter() - start
                    done = bool(tool.done)
                    out.record(
                        {
                            "type": "tool",
                            "name": value,
                            "arguments": arguments,
                            "data": _jsonable(tool.data),
                            "text": tool.text,
                            "reward": tool.reward,
                            "done": tool.done,
                        },
                        f"tool {value}({shown}) -> data={_short(tool.data)} text={_short(tool.text, 80)}"
                        + (
                            f" reward={_num(tool.reward)} done={tool.done}"
                            if tool.reward is not None or tool.done
                            else ""
                        ),
                    )
                if done:
                    break
            where = ""
            if not args.json:
                if done and step_count:
                    print(f"episode done after {steps_done} of {plural(step_count, 'step')}")
                elif done:
                    print(f"episode done after {plural(calls_done, 'tool call')}")
                if steps_done:
                    mean_ms = 1000 * steps_time / steps_done
                    print(f"{plural(steps_done, 'step')}, mean step latency {mean_ms:.3f} ms")
                if calls_done:
                    mean_ms = 1000 * calls_time / calls_done
                    print(f"{plural(calls_done, 'tool call')}, mean latency {mean_ms:.3f} ms")
        if args.target is None and not args.ops:
            _tool_demo(out)
        return 0
    except OpenEnvError as exc:
        out.error(exc, where)
        from openenv._core.errors import ServerValidationError

        if isinstance(exc, ServerValidationError) and where.startswith("step"):
            print(
                f"hint: {_prog()} schema{_target_words(args)} shows the action schema",
                file=sys.stderr,
            )
        hint = _hint(exc, args)
        if hint:
            print(hint, file=sys.stderr)
        if where.startswith("tool ") and f"{_prog()} tools" not in (hint or ""):
            print(f"hint: {_prog()} tools{_target_words(args)} shows the tools and their parameters", file=sys.stderr)
        return _status(exc)
    except OSError as exc:  # e.g. the in-process server cannot bind
        out.error(exc, where)
        return 1


def _tool_demo(out: _Out) -> None:
    """One MCP tool call against the built-in tool environment (in-process server); ``--json``: two records."""
    from openenv.server import EnvServer
    from openenv.server.tools_demo import ToolsDemoEnvironment
    from openenv.sync import Env

    with EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0) as server:
        with Env(server.url) as env:
            env.reset()
            names = [t.name for t in env.list_tools()]
            result = env.call_tool("add", a=2, b=40)
            out.record(
                {"type": "tools", "tools": names, "demo": "tools", "url": server.url},
                f"tool demo, on a second in-process server (the built-in tool environment) {server.url}:\n"
                f"tools: {', '.join(names)}",
            )
            out.record(
                {
                    "type": "tool",
                    "name": "add",
                    "arguments": {"a": 2, "b": 40},
                    "data": _jsonable(result.data),
                    "text": result.text,
                    "reward": result.reward,
                    "done": result.done,
                    "demo": "tools",
                },
                f"call_tool add(a=2, b=40) -> data={result.data!r} text={result.text!r} "
                f"reward={_num(result.reward)} done={result.done}",
            )


_RUN_EPILOG = """\
Each --action is one step, in order; --tool NAME [--args JSON] is one MCP tool
call (env.call_tool(NAME, **ARGS)), made where it stands among the actions.
The episode is reset first (with --seed / --reset-kwargs) and stops at done.

Without --action, each step sends a default action built from the
environment's action schema (GET /schema): required fields get their default,
first example, first enum value, or "", 0, false, [], {}. An environment with
MCP tools gets a tool call instead: run lists its tools and calls one whose
arguments it can build from the tool's schema (one without required
parameters first). If nothing can be built, run exits with status 2 and says
which fields, or which --tool, to give.

Without TARGET (the demo), run serves the built-in echo environment on an
in-process server; without --action and --tool it then starts a second
in-process server, the built-in tool environment (openenv.server.tools_demo),
and makes one tool call against it (with --json too: a "tools" and a "tool"
record, marked "demo": "tools"). With a TARGET and no --action, run first
says which action it built from the schema ("default_action" with --json).

A checkout directory runs with its own .venv, uv, or this interpreter;
--install creates its .venv first, --command 'CMD' starts it your own way.

output: one short line per reset/step/tool call (numbers rounded for reading);
--json prints one JSON object per line instead ({"type": "reset"|"step"|
"tool"|"tools"|"error", ...}, exact values). Progress notes go to stderr.

exit status: 0 ok; 1 a server or connection error, or an observation that
reports an error (its message is printed); 2 bad usage (a target that names
nothing, a directory that is not an OpenEnv environment, bad JSON, --tool on
an environment without tools) or no default action.

examples:
  %(prog)s                # the echo demo, served in-process (plus the tool demo)
  %(prog)s http://127.0.0.1:8000 --action '{"message": "hi"}' --steps 3
  %(prog)s my-env:latest --action '{"move": "e4"}' --action '{"move": "e5"}'
  %(prog)s ./my_env --action @action.json --seed 7 --json
  %(prog)s ./my_env --install
  %(prog)s owner/space-name --reset-kwargs '{"difficulty": "easy"}'
  %(prog)s http://127.0.0.1:8000 --tool add --args '{"a": 2, "b": 40}'
"""


def add_parser(commands: Any, raw: type[argparse.HelpFormatter]) -> None:
    """The ``run`` command."""
    p_run = commands.add_parser(
        "run",
        help="reset an environment, step it with actions, call its tools",
        description="Start or connect to an environment, reset it, then send actions and tool calls.\n"
        "Without TARGET it serves the built-in echo environment in-process and, without --action/--tool,\n"
        "starts a second in-process server (the built-in tool environment) for a tool-call demo.",
        epilog=_RUN_EPILOG,
        formatter_class=raw,
    )
    _add_target(p_run)
    p_run.add_argument(
        "--action",
        action=_AppendOp,
        metavar="JSON",
        help="one step's action as a JSON object, or @FILE to read it from a file (repeatable, in order)",
    )
    p_run.add_argument(
        "--steps",
        type=_positive_or_zero,
        default=None,
        metavar="N",
        help=f"number of steps: with one --action, send it N times; with none, send the default action N "
        f"times (default: one step per --action; {_DEFAULT_STEPS} without --action and --tool)",
    )
    p_run.add_argument("--seed", type=_integer, default=None, help="seed for reset")
    p_run.add_argument(
        "--reset-kwargs",
        metavar="JSON",
        default=None,
        help="more keyword arguments for reset, as a JSON object (or @FILE)",
    )
    p_run.add_argument("--tool", action=_AppendOp, metavar="NAME", help="call the MCP tool NAME (repeatable, in order)")
    p_run.add_argument(
        "--args",
        action=_AppendOp,
        metavar="JSON",
        help="arguments of the --tool just before it, as a JSON object (or @FILE); default {}",
    )
    p_run.add_argument("--json", action="store_true", help="print one JSON object per line (for scripts)")
    p_run.set_defaults(func=_cmd_run, ops=None)
