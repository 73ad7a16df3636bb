"""The reaper: removes what its owner started once the owner is gone (``python -m openenv._reaper OWNER_PID``).

Started by `openenv._blocking.lifetimes` on first use, one per owner
process, in its own session, with its standard input a pipe from the owner and
its output on ``/dev/null``.  It reads registration lines (see
`openenv._core.lifetimes`) until EOF, which comes when the owner exits or
is killed (even with SIGKILL).  Then it ends each registered process group
whose leader still has the recorded start time (a reused PID is never
signalled), force-removes each registered container that still carries the
recorded session label, and exits.  After a normal exit of the owner nothing is
registered any more, and it exits at once.  A container that is not there
(yet) is waited for until its ``docker create`` has settled
(`openenv._blocking.docker.reap_container`).

Standard library only, plus docker-py when there are containers to remove.
"""

from __future__ import annotations

import signal
import sys


def main(argv: list[str]) -> int:
    from openenv._blocking.process_registry import remove_record, sweep_temporary_records
    from openenv._blocking.procfs import kill_group
    from openenv._core.lifetimes import parse_message

    for name in ("SIGINT", "SIGHUP", "SIGTERM"):
        sig = getattr(signal, name, None)
        if sig is not None:  # only EOF on the pipe ends it
            signal.signal(sig, signal.SIG_IGN)
    containers: dict[str, tuple[str, str]] = {}  # name -> (session, image)
    processes: dict[tuple[int, int], None] = {}
    stream = sys.stdin.buffer
    for line in stream:
        message = parse_message(line)
        if message is None:
            continue
        op, kind, first, second, image = message
        if kind == "p":
            key = (int(first), int(second))
            if op == "+":
                processes[key] = None
            else:
                processes.pop(key, None)
        elif op == "+":
            containers[first] = (second, image)
        else:
            containers.pop(first, None)
    for pid, start in processes:
        try:
            kill_group(pid, start)
        finally:
            remove_record(pid, start)
    if argv and argv[0].isdigit():  # the owner died mid-write of a registry record
        sweep_temporary_records(writer=int(argv[0]))
    if containers:
        _remove_containers(containers)
    return 0


def _remove_containers(containers: dict[str, tuple[str, str]]) -> None:
    try:
        from openenv._blocking import docker as _docker

        client = _docker.connect_client(60)
    except Exception:
        return
    try:
        for name, (session, image) in containers.items():
            # its create may still be in flight: wait until it settled one way or the other
            _docker.reap_container(client, name, session, image or None)
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
