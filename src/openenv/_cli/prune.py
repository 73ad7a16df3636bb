"""``prune``: remove the containers and local servers of dead programs."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _prune_processes(args: argparse.Namespace) -> None:
    """List (and end) local server processes this library started, from its process registry."""
    from openenv._blocking.process_registry import prune_processes
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


def _prune_external(args: argparse.Namespace) -> None:
    """List the servers OpenEnv-style providers (cloud sandboxes) started; none can be removed from here."""
    from openenv._blocking.external import prune_external

    for record, verdict in prune_external(dry_run=args.dry_run):
        if verdict == "keep":
            shown = "kept (owner alive)"
        else:
            shown = "owner gone: remove it with its provider (its console or CLI), or wait for its own lifetime"
            shown += "" if args.dry_run else " (record dropped)"
        print(f"external owner={record.owner_pid:<8} {record.provider} {record.description}: {shown}")


def _cmd_prune(args: argparse.Namespace) -> int:
    """List (and remove) containers and local server processes this library started that are still around."""
    from openenv._blocking import docker as _docker
    from openenv._blocking.docker import prune_containers
    from openenv._core.errors import DockerUnavailable, OpenEnvError

    _prune_processes(args)
    _prune_external(args)
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


_PRUNE_EPILOG = """\
Containers started by this library carry the label org.openenv.managed=1 and
their owner's identity (host, boot id, PID namespace, PID and its start time);
local server processes are recorded with their start time and their owner's
(a PID alone is never trusted, PIDs get reused). prune removes only what it can
prove belongs to a dead program of this host; anything else is listed and left
alone unless --all is given. Servers started through another package's provider
(OpenEnvProvider: a cloud sandbox) are listed ("external"); prune cannot remove
them: only their provider can, or their own lifetime ends them.

examples:
  %(prog)s --dry-run
  %(prog)s --all
"""


def add_parser(commands: Any, raw: type[argparse.HelpFormatter]) -> None:
    """The ``prune`` command."""
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
