"""The ``openenv`` command line (``python -m openenv ...``).

Commands:

``serve MODULE:FACTORY [--host H] [--port P] [--max-sessions N]``
    Serve an environment with :class:`openenv.server.EnvServer` until Ctrl-C
    or SIGTERM. ``MODULE:FACTORY`` names an :class:`~openenv.server.Environment`
    subclass or a zero-argument callable (``pkg.mod:Factory``, dotted
    attributes allowed); ``echo`` is a shortcut for the built-in echo
    environment. ``--max-sessions`` defaults to ``$MAX_CONCURRENT_ENVS``, else 1.
    When the server listens, one line ``serving <name> on http://HOST:PORT`` is
    written to stderr (tools wait for it; with ``--port 0`` it carries the
    chosen port).

``run [URL] [--steps N]``
    Run a short episode with the blocking client and print each step, then the
    number of steps and the mean step latency. Without ``URL`` an in-process
    echo server on ``127.0.0.1`` (ephemeral port) is used. The actions are
    echo-style ``{"message": "hello <n>"}``, so a server given by ``URL`` must
    accept them (the echo environment does). Any client error prints one
    ``error: ...`` line to stderr and exits with status 1.  Without ``URL`` it
    then also lists the tools of the built-in tool environment
    (:mod:`openenv.server.tools_demo`) and makes one call, ``add(a=2, b=40)``.

Exit status: 0 on success, 1 on a runtime error, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
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
    return obj


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
    try:
        server = EnvServer(factory, host=args.host, port=args.port, max_sessions=max_sessions)
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


def _num(value: Any) -> str:
    return "None" if value is None else f"{value:.6g}"


def _short(value: Any, limit: int = 200) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cmd_run(args: argparse.Namespace) -> int:
    from openenv._core.errors import OpenEnvError

    try:
        from openenv.sync import Env
    except ImportError as exc:
        print(f"error: the blocking client is not available: {exc}", file=sys.stderr)
        return 1

    server = None
    try:
        target = args.target
        if target is None:
            from openenv.server import EnvServer
            from openenv.server.echo import EchoEnvironment

            server = EnvServer(EchoEnvironment).start()
            target = server.url
            print(f"started an in-process echo server on {target}")
        opened = time.perf_counter()
        env = _open_target(Env, target, args.ready_timeout)
        if args.target is not None and env.provider is not None:
            print(f"started {target} in {time.perf_counter() - opened:.2f} s: {env.base_url}")
        latencies: list[float] = []
        with env:
            result = env.reset()
            print(f"reset:  observation={_short(result.observation)} reward={_num(result.reward)} done={result.done}")
            for n in range(1, args.steps + 1):
                action = {"message": f"hello {n}"}
                start = time.perf_counter()
                result = env.step(action)
                latencies.append(time.perf_counter() - start)
                print(
                    f"step {n}: action={_short(action)} observation={_short(result.observation)} "
                    f"reward={_num(result.reward)} done={result.done}"
                )
                if result.done:
                    break
        mean_ms = 1000 * sum(latencies) / len(latencies) if latencies else 0.0
        print(f"{len(latencies)} steps, mean step latency {mean_ms:.3f} ms")
        if args.target is None:
            _tool_demo(Env)
        return 0
    except OpenEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if server is not None:
            server.stop()


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

    for record, verdict in prune_processes(everything=args.all, dry_run=args.dry_run):
        shown = {"keep": "kept (owner alive; --all removes it)", "forget": "already gone (record dropped)"}.get(
            verdict, "would stop" if args.dry_run else "stopped"
        )
        if verdict == "forget" and args.dry_run:
            shown = "already gone"
        command = " ".join(record.command)[:60]
        print(f"process pid={record.pid:<8} owner={record.owner_pid:<8} {command:60} {shown}")


def _cmd_prune(args: argparse.Namespace) -> int:
    """List (and remove) containers and local server processes this library started that are still around."""
    import os

    from openenv._blocking import docker as _docker
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
        found = _docker.list_managed(client)
        if not found:
            print("no containers started by openenv")
            return 0
        removed = 0
        for item in found:
            owner = item.pid
            alive = owner is not None and _pid_alive(owner) and owner != os.getpid()
            keep = alive and not args.all
            verdict = "kept (owner alive; --all removes it)" if keep else "would remove" if args.dry_run else "removed"
            if not keep and not args.dry_run:
                _docker.remove_container(client, item.id)
                removed += 1
            print(f"{item.name:40} {item.image:40} {item.status:24} pid={owner} {verdict}")
        print(f"{removed} removed, {len(found) - removed} left")
        return 0
    except OpenEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()


def _pid_alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tool_demo(env_cls: Any) -> None:
    """One MCP tool call against the built-in tool environment (in-process server)."""
    from openenv.server import EnvServer
    from openenv.server.tools_demo import ToolsDemoEnvironment

    with EnvServer(ToolsDemoEnvironment) as server:
        with env_cls(server.url) as env:
            names = [t.name for t in env.list_tools()]
            result = env.call_tool("add", a=2, b=40)
            print(f"tools on {server.url}: {', '.join(names)}")
            print(f"call_tool add(a=2, b=40) -> data={result.data!r} text={result.text!r}")


def _positive_or_zero(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one subparser per command)."""
    parser = argparse.ArgumentParser(prog="python -m openenv", description="OpenEnv tools.")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="logging level for messages on stderr (default: WARNING)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p_serve = commands.add_parser("serve", help="serve an environment over the OpenEnv protocol")
    p_serve.add_argument("factory", metavar="MODULE:FACTORY", help="environment class or factory, or 'echo'")
    p_serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    p_serve.add_argument("--port", type=_positive_or_zero, default=8000, help="TCP port, 0 for any (default: 8000)")
    p_serve.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        help="concurrent /ws sessions (default: $MAX_CONCURRENT_ENVS, else 1)",
    )
    p_serve.set_defaults(func=_cmd_serve)

    p_run = commands.add_parser("run", help="run a short echo-style episode and report step latency")
    p_run.add_argument(
        "target",
        nargs="?",
        default=None,
        help="a server URL, a local environment directory, a Space id (owner/name) or a Docker "
        "image (prefix docker: or space: to force the kind); default: an in-process echo server",
    )
    p_run.add_argument(
        "--ready-timeout", type=float, default=60.0, help="seconds for a started server to become healthy"
    )
    p_run.add_argument("--steps", type=_positive_or_zero, default=5, help="number of steps (default: 5)")
    p_run.set_defaults(func=_cmd_run)

    p_prune = commands.add_parser(
        "prune", help="remove containers and local servers openenv started whose owner process is gone"
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
