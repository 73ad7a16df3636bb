"""The ``openenv`` command line (``python -m openenv ...``), one module per command.

Commands:

``serve MODULE:FACTORY [--host H] [--port P] [--max-sessions N] [--idle-timeout S] [--max-pending N] [--transport T]``
    Serve an environment with [`openenv.server.EnvServer`][openenv.server.EnvServer] until Ctrl-C
    or SIGTERM. ``MODULE:FACTORY`` names an [`Environment`][openenv.server.Environment]
    subclass or a zero-argument callable (``pkg.mod:Factory``, dotted
    attributes allowed); ``echo`` is a shortcut for the built-in echo
    environment. ``--max-sessions`` defaults to ``$MAX_CONCURRENT_ENVS``, else 8 for
    the built-in ``echo`` and ``openenv.server.tools_demo:ToolsDemoEnvironment`` (like the
    OpenEnv servers that read ``MAX_CONCURRENT_ENVS``), else 1 (the default of ``EnvServer``).
    When the server listens, one line ``serving <name> on http://HOST:PORT`` is
    written to stderr (tools wait for it; with ``--port 0`` it carries the
    chosen port).

``run [TARGET] [--action JSON]... [--steps N] [--seed S] [--reset-kwargs JSON] [--tool NAME [--args JSON]]... [--json]``
    Start or connect to ``TARGET`` (a URL, a Docker image ``name:tag``, a
    Space id ``owner/name`` or a local checkout directory, read by
    `openenv._core.targets` as every constructor reads it; default: the
    built-in echo environment on an in-process server on ``127.0.0.1``),
    reset it, then send each ``--action`` as one step and make each
    ``--tool`` call (``env.call_tool``), in command-line order, stopping at
    ``done``.  Without ``--action``, each step sends a default action built
    from the ``GET /schema`` action schema
    (`openenv._core.defaults.default_value()`), or, on an environment with MCP
    tools, calls a tool whose arguments its schema gives
    (`openenv._core.cli.pick_tool()`); when neither can be built the command
    exits with status 2 saying what to give.  Prints one short line per
    result, or one JSON object per line with ``--json``.  Server and
    connection errors, and observations that report an error, print the
    message and exit with status 1.  Without ``TARGET`` and without
    ``--action``/``--tool`` it also starts a second in-process server (the
    built-in tool environment, `openenv.server.tools_demo`) for one tool call.
    ``--install`` and ``--command CMD`` (also on ``schema`` and ``tools``) say
    how to run a checkout.

``schema [TARGET] [--json]``
    Print the target's action, observation and state JSON Schemas.

``tools [TARGET] [--json]``
    List the target's MCP tools and their parameters.

``prune [--all] [--dry-run]``
    Remove containers this library started whose owner process is gone.

``--version`` prints the version.  Exit status: 0 on success, 1 on a runtime
error, 2 on a usage error (a target that names nothing, a bad option value, a
mistyped command or option, which gets a "did you mean").
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .._core.cli import did_you_mean
from .._core.loader import load_factory
from . import inspect, prune, run, serve
from ._common import _prog, _UsageError, ctrl_c_never_lost

__all__ = ["main", "build_parser", "load_factory"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openenv-twin")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for a mistyped command or option (exit status 2, as argparse)."""

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if choice:
            names = [a for action in self._actions for a in (getattr(action, "choices", None) or ())]
            message += did_you_mean(choice.group(1), [str(n) for n in names])
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown and unknown.group(1).startswith("--"):
            flag = unknown.group(1).partition("=")[0]
            options = set(self._option_string_actions)
            for action in self._actions:  # the commands' options too: parse_args reports them at the top
                if isinstance(action, argparse._SubParsersAction):
                    for sub in action.choices.values():
                        options.update(sub._option_string_actions)
            message += did_you_mean(flag, sorted(o for o in options if o.startswith("--")))
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one subparser per command)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
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
    parser.add_argument("--version", action="version", version=f"openenv-twin {_version()}")
    commands = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)

    run.add_parser(commands, raw)
    inspect.add_parser(commands, raw)
    serve.add_parser(commands, raw)
    prune.add_parser(commands, raw)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (130 after Ctrl-C, with one line on stderr)."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    logging.basicConfig(level=getattr(logging, args.log_level), format="%(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        with ctrl_c_never_lost():
            return func(args)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, in any command: one line, no traceback (what was started is stopped)
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
