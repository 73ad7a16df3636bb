"""Leak checks shared by the fault suites: threads, fds, sockets, child processes, containers.

Take a :func:`snapshot` once the servers of a test are up, run the fault, close
the clients, then :func:`assert_no_leaks`: it polls (bounded) until everything
new since the snapshot is gone, since server-side threads and sockets end a
moment after the client's close.  All figures come from ``/proc``.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

#: child processes a test keeps on purpose (servers started by tests/faultservers.py)
EXPECTED_CHILDREN: set[int] = set()


@dataclass(frozen=True)
class Snapshot:
    """What the test process holds at one moment."""

    threads: frozenset[int]
    fds: frozenset[int]
    children: frozenset[int]
    extra: dict[str, Any] = field(default_factory=dict)


def _fd_target(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


def open_fds() -> set[int]:
    """The file descriptors open in this process (``/proc/self/fd``, without the listing's own)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the directory listing's own fd, closed already
        found.add(int(name))
    return found


def sockets() -> set[int]:
    """The fds of this process that are sockets."""
    return {fd for fd in open_fds() if _fd_target(fd).startswith("socket:")}


def socket_inodes() -> set[str]:
    """The sockets this process holds open, by inode (``socket:[123]``: unlike an fd, never reused at once)."""
    return {target for target in map(_fd_target, open_fds()) if target.startswith("socket:")}


def children() -> set[int]:
    """Live (non-zombie) child processes of this process."""
    me = str(os.getpid())
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            found.add(int(name))
    return found


def servers_in(directory: str | os.PathLike[str]) -> set[int]:
    """The servers running in ``directory``, as the OS sees them: the live leaders of its process groups.

    A started server leads a process group of its own (with its lifeline watcher, which may
    outlive it a moment, so it is not counted). A test gives each server a directory of its own (a checkout copied to
    ``tmp_path``, a provider's ``cwd``), so this counts and finds that test's servers without
    reaching into a provider.
    """
    wanted = os.path.realpath(directory)
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/cwd") != wanted:
                continue
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # gone, or another user's
            continue
        if fields[0] != "Z" and fields[2] == name:  # a group's leader: the server (its watcher may linger)
            found.add(int(name))
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def snapshot() -> Snapshot:
    """Threads, fds and child processes of this process now."""
    return Snapshot(
        threads=frozenset(t.ident or 0 for t in threading.enumerate()),
        fds=frozenset(open_fds()),
        children=frozenset(children()),
    )


def leaked(before: Snapshot) -> dict[str, list[str]]:
    """What exists now and did not at ``before`` (empty lists: nothing)."""
    threads = [
        t.name
        for t in threading.enumerate()
        # asyncio's default executor keeps its worker threads for the loop's life (reused, not leaked)
        if (t.ident or 0) not in before.threads and not t.name.startswith("asyncio_")
    ]
    fds = [f"{fd} -> {_fd_target(fd)}" for fd in sorted(open_fds() - before.fds)]
    procs = [str(pid) for pid in sorted(children() - before.children - EXPECTED_CHILDREN)]
    return {"threads": threads, "fds": fds, "processes": procs}


def assert_no_leaks(before: Snapshot, timeout: float = 10.0) -> None:
    """Poll until nothing is left over from ``before``; fail with the list otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()  # objects in reference cycles (a traceback holding a socket) close on collection
        left = leaked(before)
        if not any(left.values()):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"left behind after {timeout} s: {left}")
        time.sleep(0.02)


#: Every listing also filters by the owner's PID label on the engine's side: listing all managed containers
#: inspects each, and one that another process (another xdist worker) removes meanwhile fails with NotFound.
MANAGED = ["org.openenv.managed=1"]


def _names(engine: Any, pid: str) -> list[str]:
    """Names of the managed containers labelled with owner ``pid``, from the engine's list alone.

    The low-level list inspects nothing, so a container that is being removed meanwhile (by a
    reaper, or a provider's stop) is simply in or out of the answer, never a NotFound.
    """
    rows = engine.api.containers(all=True, filters={"label": [*MANAGED, f"org.openenv.pid={pid}"]})
    return [str((row.get("Names") or ["?"])[0]).lstrip("/") for row in rows]


def managed_containers(engine: Any) -> list[str]:
    """Containers labelled ``org.openenv.managed=1`` started by this process."""
    return _names(engine, str(os.getpid()))


def assert_no_containers(engine: Any, timeout: float = 20.0, label_pid: int | None = None) -> None:
    """Poll until no managed container of this process (or of ``label_pid``) exists."""
    pid = str(label_pid if label_pid is not None else os.getpid())
    deadline = time.monotonic() + timeout
    while True:
        left = _names(engine, pid)
        if not left:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"containers left behind: {left}")
        time.sleep(0.1)
