"""The ``openenv`` command line (``python -m openenv ...``), one module per command.

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
import logging
from collections.abc import Callable, Sequence

from .._core.loader import load_factory
from . import inspect, prune, run, serve
from ._common import _prog

__all__ = ["main", "build_parser", "load_factory"]


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

    run.add_parser(commands, raw)
    inspect.add_parser(commands, raw)
    serve.add_parser(commands, raw)
    prune.add_parser(commands, raw)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level), format="%(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)
