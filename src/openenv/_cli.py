"""The ``openenv`` command line (``python -m openenv ...``).

Commands:

``serve MODULE:FACTORY [--host H] [--port P] [--max-sessions N] [--idle-timeout S] [--max-pending N]``
    Serve an environment with [`openenv.server.EnvServer`][openenv.server.EnvServer] until Ctrl-C
    or SIGTERM. ``MODULE:FACTORY`` names an [`Environment`][openenv.server.Environment]
    subclass or a zero-argument callable (``pkg.mod:Factory``, dotted
    attributes allowed); ``echo`` is a shortcut for the built-in echo
    environment. ``--max-sessions`` defaults to ``$MAX_CONCURRENT_ENVS``, else 1.
    When the server listens, one line ``serving <name> on http://HOST:PORT`` is
    written to stderr (tools wait for it; with ``--port 0`` it carries the
    chosen port).

``run [TARGET] [--action JSON]... [--steps N] [--seed S] [--reset-kwargs JSON] [--tool NAME [--args JSON]]... [--json]``
    Start or connect to ``TARGET`` (a URL, a local checkout directory, a Space
    id or a Docker image; default: the built-in echo environment on an
    in-process server on ``127.0.0.1``), reset it, then send each ``--action``
    as one step and make each ``--tool`` call (``env.call_tool``), in
    command-line order, stopping at ``done``.  Without ``--action``, each step
    sends a default action built from the ``GET /schema`` action schema
    (`openenv._core.defaults.default_value()`); when none can be built the
    command exits with status 2 naming the fields it needs.  Prints one short
    line per result, or one JSON object per line with ``--json``.  Server and
    connection errors print the server's message and exit with status 1.
    Without ``TARGET`` and without ``--action``/``--tool`` it also makes one
    tool call against the built-in tool environment
    (`openenv.server.tools_demo`).

``schema [TARGET] [--json]``
    Print the target's action, observation and state JSON Schemas.

``tools [TARGET] [--json]``
    List the target's MCP tools and their parameters.

``prune [--all] [--dry-run]``
    Remove containers this library started whose owner process is gone.

Exit status: 0 on success, 1 on a runtime error, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["main", "build_parser", "load_factory"]

_ECHO = "openenv.server.echo:EchoEnvironment"


def load_factory(spec: str) -> Callable[[], Any]:
    """Import ``MODULE:ATTR`` (``ATTR`` may be dotted) or the shortcut ``echo``.

    Raises:
        ValueError: ``spec`` is malformed, or the object is missing or not callable.
        ImportError: the module cannot be imported.
    """
    if spec == "echo":
        spec = _ECHO
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:FACTORY (or 'echo'), got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"{spec!r} is not a class or callable")
    factory: Callable[[], Any] = obj
    return factory


def _default_max_sessions() -> int:
    raw = os.environ.get("MAX_CONCURRENT_ENVS", "").strip()
    if not raw:
        return 1
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"error: MAX_CONCURRENT_ENVS must be an integer, not {raw!r}") from None
    return value


def _cmd_serve(args: argparse.Namespace) -> int:
    from openenv.server import EnvServer

    try:
        factory = load_factory(args.factory)
    except (ImportError, ValueError) as exc:
        print(f"error: cannot load {args.factory!r}: {exc}", file=sys.stderr)
        return 2
    max_sessions = args.max_sessions if args.max_sessions is not None else _default_max_sessions()
    if args.asgi:
        return _serve_asgi(factory, args, max_sessions)
    try:
        server = EnvServer(
            factory,
            host=args.host,
            port=args.port,
            max_sessions=max_sessions,
            idle_timeout=args.idle_timeout if args.idle_timeout > 0 else None,
            max_pending=args.max_pending,
        )
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def ready(srv: EnvServer) -> None:
        print(f"serving {srv.name} on {srv.url}", file=sys.stderr, flush=True)

    try:
        server.serve_forever(on_ready=ready)
    except OSError as exc:
        print(f"error: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


def _serve_asgi(factory: Any, args: argparse.Namespace, max_sessions: int) -> int:
    """``serve --asgi``: the ASGI app under uvicorn (``POST /reset``, ``/step``, ``/mcp`` included)."""
    try:
        import uvicorn

        from openenv.server.asgi import create_app
    except ImportError as exc:
        print(f"error: --asgi needs starlette and uvicorn (pip install 'openenv-twin[server]'): {exc}", file=sys.stderr)
        return 2
    try:
        app = create_app(factory, max_sessions=max_sessions, idle_timeout=args.idle_timeout or None)
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower())
    return 0


class _UsageError(Exception):
    """A bad command line (exit status 2)."""


_DEFAULT_STEPS = 5
_OBS_LIMIT = 160


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _num(value: Any) -> str:
    return "None" if value is None else f"{value:.6g}"


def _short(value: Any, limit: int = _OBS_LIMIT) -> str:
    text = json.dumps(_jsonable(value), default=str, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 3]}... ({len(text)} chars)"


def _load_json(text: str, option: str) -> Any:
    """The JSON of an option value, or of the file named by ``@path``."""
    source = text
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise _UsageError(f"{option} {source}: cannot read {text[1:]!r}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        shown = source if len(source) <= 80 else source[:77] + "..."
        raise _UsageError(
            f'{option} {shown!r} is not valid JSON ({exc}); write an object, e.g. {option} \'{{"message": "hi"}}\''
        ) from None


def _load_object(text: str, option: str) -> dict[str, Any]:
    value = _load_json(text, option)
    if not isinstance(value, dict):
        raise _UsageError(f"{option} must be a JSON object ({{...}}), not {type(value).__name__}: {text[:80]!r}")
    return value


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


class _Out:
    """Where ``run`` reports: short human lines, or one JSON object per line (``--json``)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def record(self, record: dict[str, Any], human: str) -> None:
        if self.as_json:
            print(json.dumps(record, default=str, ensure_ascii=False), flush=True)
        else:
            print(human, flush=True)

    def error(self, exc: BaseException, where: str = "") -> None:
        message = f"{where}{exc}"
        if self.as_json:
            record = {"type": "error", "error": type(exc).__name__, "message": message}
            print(json.dumps(record, default=str, ensure_ascii=False), flush=True)
        print(f"error: {message}", file=sys.stderr, flush=True)


def _plan(args: argparse.Namespace) -> tuple[list[tuple[str, Any, Any]], int]:
    """The ops to run in order (``("action", dict|None, _)``: ``None`` = the default action) and their step count."""
    ops: list[tuple[str, Any, Any]] = []
    for kind, value, extra in args.ops or []:
        if kind == "action":
            ops.append(("action", _load_object(value, "--action"), None))
        else:
            arguments = {} if extra is None else _load_object(extra, "--args")
            ops.append(("tool", value, arguments))
    actions = [op for op in ops if op[0] == "action"]
    steps = args.steps
    if steps is None:
        if not ops:
            ops = [("action", None, None)] * _DEFAULT_STEPS
    elif not actions:
        ops = [("action", None, None)] * steps + ops
    elif len(actions) == 1:
        expanded: list[tuple[str, Any, Any]] = []
        for op in ops:
            expanded.extend([op] * steps if op[0] == "action" else [op])
        ops = expanded
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
    return ops, sum(1 for op in ops if op[0] == "action")


def _reset_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs = {} if args.reset_kwargs is None else _load_object(args.reset_kwargs, "--reset-kwargs")
    if args.seed is not None:
        kwargs["seed"] = args.seed
    return kwargs


@contextlib.contextmanager
def _session(args: argparse.Namespace, out: _Out) -> Iterator[Any]:
    """A connected blocking client for ``args.target`` (an in-process echo server when it is ``None``)."""
    from openenv.sync import Env

    server = None
    try:
        target = args.target
        if target is None:
            from openenv.server import EnvServer
            from openenv.server.echo import EchoEnvironment

            server = EnvServer(EchoEnvironment, host="127.0.0.1", port=0).start()
            target = server.url
            out.note(f"started an in-process echo server on {target}")
        opened = time.perf_counter()
        env = _open_target(Env, target, args.ready_timeout)
        with env:
            if args.target is not None and env.provider is not None:
                out.note(f"started {target} in {time.perf_counter() - opened:.2f} s: {env.base_url}")
            yield env
    finally:
        if server is not None:
            server.stop()


def _fetch_schema(base_url: str) -> dict[str, Any]:
    """The server's ``GET /schema`` object.

    Raises:
        ConnectError: the request failed.
        ProtocolError: the answer was not a JSON object.
    """
    import httpx

    from openenv._adapters import httpx_error
    from openenv._blocking.sources import hosted_headers
    from openenv._core import mcp
    from openenv._core.errors import ProtocolError
    from openenv._core.urls import parse_base_url, redact_url

    endpoints = parse_base_url(base_url)
    url = endpoints.http("/schema")
    try:
        with httpx.Client(trust_env=not endpoints.is_local, headers=hosted_headers(base_url, None)) as http:
            response = http.get(url, timeout=httpx.Timeout(60.0, connect=10.0))
    except httpx.HTTPError as exc:
        raise httpx_error(exc, redact_url(url)) from None
    schema = mcp.http_json(response.status_code, response.content, redact_url(url))
    if not isinstance(schema, dict):
        raise ProtocolError(f"{redact_url(url)} did not answer a JSON object")
    return schema


def _target_words(args: argparse.Namespace) -> str:
    import shlex

    return "" if args.target is None else " " + shlex.quote(args.target)


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
        schema = _fetch_schema(env.base_url)
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


class _NoAction(Exception):
    """No default action (exit status 2)."""


def _cmd_run(args: argparse.Namespace) -> int:
    from openenv._core.errors import OpenEnvError

    out = _Out(args.json)
    try:
        ops, step_count = _plan(args)
        reset_kwargs = _reset_kwargs(args)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    where = ""
    try:
        with _session(args, out) as env:
            default: Callable[[int], dict[str, Any]] | None = None
            if any(op[0] == "action" and op[1] is None for op in ops):
                try:
                    default = _default_action(env, args)
                except _NoAction as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
            where = "reset: "
            result = env.reset(**reset_kwargs)
            out.record(
                {
                    "type": "reset",
                    "observation": _jsonable(result.observation),
                    "reward": result.reward,
                    "done": result.done,
                },
                f"reset: observation={_short(result.observation)} reward={_num(result.reward)} done={result.done}",
            )
            latencies: list[float] = []
            done = False
            for kind, value, arguments in ops:
                if kind == "action":
                    n = len(latencies) + 1
                    where = f"step {n}: "
                    action = value if value is not None else default(n)  # type: ignore[misc]
                    start = time.perf_counter()
                    result = env.step(action)
                    latencies.append(time.perf_counter() - start)
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
                else:
                    shown = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in arguments.items())
                    where = f"tool {value}({shown}): "
                    tool = env.call_tool(value, **arguments)
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
                if done:
                    print(f"episode done after {len(latencies)} of {step_count} steps")
                if latencies:
                    mean_ms = 1000 * sum(latencies) / len(latencies)
                    print(f"{len(latencies)} steps, mean step latency {mean_ms:.3f} ms")
        if args.target is None and not args.ops and not args.json:
            _tool_demo()
        return 0
    except OpenEnvError as exc:
        out.error(exc, where)
        from openenv._core.errors import ServerValidationError

        if isinstance(exc, ServerValidationError) and where.startswith("step"):
            print(
                f"hint: {_prog()} schema{_target_words(args)} shows the action schema",
                file=sys.stderr,
            )
        return 1
    except OSError as exc:  # e.g. the in-process server cannot bind
        out.error(exc, where)
        return 1
    except KeyboardInterrupt:
        return 130


def _open_target(env_cls: Any, target: str, ready_timeout: float) -> Any:
    """A connected client for a run target: URL, local directory, Space id or Docker image.

    ``docker:IMAGE`` and ``space:OWNER/NAME`` force the kind; otherwise a URL
    (``scheme://``), an existing directory, an ``owner/name`` id without a tag
    (a Hugging Face Space) or else a Docker image reference is assumed.
    """
    import os
    import re

    if target.startswith("docker:"):
        return env_cls.from_docker_image(target[len("docker:") :], ready_timeout=ready_timeout)
    if target.startswith("space:"):
        return env_cls.from_env(target[len("space:") :], ready_timeout=ready_timeout)
    if "://" in target:
        return env_cls(target).connect()
    if os.path.isdir(target) or re.fullmatch(r"[\w.-]+/[\w.-]+", target):
        return env_cls.from_env(target, ready_timeout=ready_timeout)
    return env_cls.from_docker_image(target, ready_timeout=ready_timeout)


def _prune_processes(args: argparse.Namespace) -> None:
    """List (and end) local server processes this library started, from its process registry."""
    from openenv._blocking.lifetimes import prune_processes
    from openenv._core.lifetimes import shorten_command

    for record, verdict in prune_processes(everything=args.all, dry_run=args.dry_run):
        shown = {
            "keep": "kept (owner alive; --all removes it)",
            "forget": "already gone (record dropped)",
            "foreign": "left alone (another PID namespace or host)",
        }.get(verdict, "would stop" if args.dry_run else "stopped")
        if verdict == "forget" and args.dry_run:
            shown = "already gone"
        command = shorten_command(record.command)
        print(f"process pid={record.pid:<8} owner={record.owner_pid:<8} {command:60} {shown}")


def _cmd_prune(args: argparse.Namespace) -> int:
    """List (and remove) containers and local server processes this library started that are still around."""
    from openenv._blocking import docker as _docker
    from openenv._blocking.lifetimes import prune_containers
    from openenv._core.errors import DockerUnavailable, OpenEnvError

    _prune_processes(args)
    try:
        client = _docker.connect_client(30)
    except DockerUnavailable as exc:
        print(f"containers skipped: {exc}", file=sys.stderr)
        return 0
    except OpenEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        found = prune_containers(client, everything=args.all, dry_run=args.dry_run)
        if not found:
            print("no containers started by openenv")
            return 0
        shown = {"keep": "kept (owner alive; --all removes it)", "foreign": "left alone (--all removes it)"}
        for item, verdict, why in found:
            done = shown.get(verdict, "would remove" if args.dry_run else "removed")
            print(f"{item.name:40} {item.image:40} {item.status:24} {why}: {done}")
        removed = 0 if args.dry_run else sum(verdict == "remove" for _, verdict, _ in found)
        print(f"{removed} removed, {len(found) - removed} left")
        return 0
    except OpenEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()


def _tool_demo() -> None:
    """One MCP tool call against the built-in tool environment (in-process server)."""
    from openenv.server import EnvServer
    from openenv.server.tools_demo import ToolsDemoEnvironment
    from openenv.sync import Env

    with EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0) as server:
        with Env(server.url) as env:
            env.reset()
            names = [t.name for t in env.list_tools()]
            result = env.call_tool("add", a=2, b=40)
            print(f"tools on {server.url}: {', '.join(names)}")
            print(f"call_tool add(a=2, b=40) -> data={result.data!r} text={result.text!r}")


_PARTS = ("action", "observation", "state")


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
            line += f"  {f.description.splitlines()[0]}"
        print(line)


def _cmd_schema(args: argparse.Namespace) -> int:
    from openenv._core.defaults import NoDefault, default_value
    from openenv._core.errors import OpenEnvError

    out = _Out(args.json)
    try:
        with _session(args, out) as env:
            schema = _fetch_schema(env.base_url)
    except (OpenEnvError, OSError) as exc:
        out.error(exc)
        return 1
    except KeyboardInterrupt:
        return 130
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
            print(f"  {str(node['description']).splitlines()[0]}")
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
    from openenv._core.errors import OpenEnvError

    out = _Out(args.json)
    try:
        with _session(args, out) as env:
            tools = env.list_tools()
    except (OpenEnvError, OSError) as exc:
        out.error(exc)
        return 1
    except KeyboardInterrupt:
        return 130
    if args.json:
        print(json.dumps([_tool_record(t) for t in tools], indent=2, ensure_ascii=False))
        return 0
    if not tools:
        print("no tools")
        return 0
    for tool in tools:
        description = (tool.description or "").strip().splitlines()
        print(f"{tool.name}: {description[0] if description else '(no description)'}")
        params = describe_fields(tool.input_schema)
        for p in params:
            how = (
                "required"
                if p.required
                else ("optional" if p.default is MISSING else f"default {json.dumps(p.default)}")
            )
            line = f"    {p.name}: {p.type} [{how}]"
            if p.description:
                line += f"  {p.description.splitlines()[0]}"
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


def _positive_or_zero(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


_TARGET_HELP = (
    "a server URL (http://..., https://...), a local environment checkout directory, a Hugging Face Space id "
    "(owner/name) or a Docker image; prefix docker: or space: to force the kind. Default: the built-in echo "
    "environment on an in-process server on 127.0.0.1"
)

_RUN_EPILOG = """\
Each --action is one step, in order; --tool NAME [--args JSON] is one MCP tool
call (env.call_tool(NAME, **ARGS)), made where it stands among the actions.
Without --action, each step sends a default action built from the
environment's action schema (GET /schema): required fields get their default,
first example, first enum value, or "", 0, false, [], {}. If none can be
built, run exits with status 2 and names the fields to give. The episode is
reset first (with --seed / --reset-kwargs) and stops at done.

output: one short line per reset/step/tool call; --json prints one JSON object
per line instead ({"type": "reset"|"step"|"tool"|"error", ...}). Progress
notes go to stderr.

exit status: 0 ok, 1 server or connection error (its message is printed),
2 bad usage or no default action.

examples:
  %(prog)s                # the echo demo, served in-process
  %(prog)s http://127.0.0.1:8000 --action '{"message": "hi"}' --steps 3
  %(prog)s my-env:latest --action '{"move": "e4"}' --action '{"move": "e5"}'
  %(prog)s ./my_env --action @action.json --seed 7 --json
  %(prog)s owner/space-name --reset-kwargs '{"difficulty": "easy"}'
  %(prog)s http://127.0.0.1:8000 --tool add --args '{"a": 2, "b": 40}'
"""

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

examples:
  %(prog)s http://127.0.0.1:8000
  %(prog)s my-env:latest --json
"""

_SERVE_EPILOG = """\
MODULE:FACTORY names an Environment subclass or a zero-argument callable
(dotted attributes allowed); 'echo' is the built-in echo environment. When the
server listens, one line "serving NAME on http://HOST:PORT" goes to stderr.
Stops on Ctrl-C or SIGTERM.

examples:
  %(prog)s echo --port 8000
  %(prog)s openenv.server.tools_demo:ToolsDemoEnvironment --port 0
  %(prog)s my_pkg.envs:ChessEnv --host 0.0.0.0 --max-sessions 8
"""

_PRUNE_EPILOG = """\
Containers started by this library carry the label org.openenv.managed=1 and
the starting process's PID; local server processes are recorded with their
start time and their owner's (a PID alone is never trusted, PIDs get reused).
prune removes those whose owner process is gone.

examples:
  %(prog)s --dry-run
  %(prog)s --all
"""


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.startswith("openenv-twin") else "python -m openenv"


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", default=None, metavar="TARGET", help=_TARGET_HELP)
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long a started server may take to become healthy (default: 60)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one subparser per command)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Run, inspect and serve OpenEnv environments.",
        epilog="Run '%(prog)s COMMAND --help' for a command's options and examples.",
        formatter_class=raw,
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="logging level for messages on stderr (default: WARNING)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p_run = commands.add_parser(
        "run",
        help="reset an environment, step it with actions, call its tools",
        description="Start or connect to an environment, reset it, then send actions and tool calls.",
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
    p_run.add_argument("--seed", type=int, default=None, help="seed for reset")
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
    p_tools.set_defaults(func=_cmd_tools)

    p_serve = commands.add_parser(
        "serve",
        help="serve an environment over the OpenEnv protocol",
        description="Serve an environment with openenv.server.EnvServer until Ctrl-C or SIGTERM.",
        epilog=_SERVE_EPILOG,
        formatter_class=raw,
    )
    p_serve.add_argument("factory", metavar="MODULE:FACTORY", help="environment class or factory, or 'echo'")
    p_serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    p_serve.add_argument("--port", type=_positive_or_zero, default=8000, help="TCP port, 0 for any (default: 8000)")
    p_serve.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        help="concurrent /ws sessions (default: $MAX_CONCURRENT_ENVS, else 1)",
    )
    p_serve.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="close a session after this many seconds without a client message; 0: never (default: 300)",
    )
    p_serve.add_argument(
        "--max-pending",
        type=int,
        default=64,
        help="connections still in their handshake, at most; more get 503 at once (default: 64)",
    )
    p_serve.add_argument(
        "--asgi",
        action="store_true",
        help="serve the ASGI app under uvicorn (POST /reset, /step, /mcp too; needs openenv-twin[server])",
    )
    p_serve.set_defaults(func=_cmd_serve)

    p_prune = commands.add_parser(
        "prune",
        help="remove containers and local servers openenv started whose owner process is gone",
        description="List, and remove, the containers and local server processes this library started\n"
        "that are still around.",
        epilog=_PRUNE_EPILOG,
        formatter_class=raw,
    )
    p_prune.add_argument("--all", action="store_true", help="also remove those of live processes")
    p_prune.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p_prune.set_defaults(func=_cmd_prune)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level), format="%(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)
