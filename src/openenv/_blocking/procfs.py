"""Facts about processes read from ``/proc``: start times, this host's boot and PID namespace, our identity.

PIDs are reused, so a process is only ever signalled after its start time (from
``/proc/<pid>/stat``) was checked against the recorded one (`kill_group`).  On
systems without ``/proc`` these answer ``None`` or ``""``.  Blocking and
loop-free: the reaper, the registry, ``prune`` and the leases all read them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from .._core.lifetimes import Here, Identity, parse_start_time

__all__ = ["process_start_time", "boot_id", "here", "owner_identity", "kill_group"]


def _stat(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), or ``None`` if there is none.

    A zombie (exited, not yet reaped) counts as gone.
    """
    stat = _stat(pid)
    if stat is None:
        return None
    state = stat.rpartition(")")[2].split()[:1]
    if state in (["Z"], ["X"]):
        return None
    return parse_start_time(stat)


def boot_id() -> str:
    """The kernel's boot id (``""`` where unknown)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def here() -> Here:
    """This host, boot and PID namespace (what an owner's `Identity` is compared with)."""
    import socket

    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return Here(host=socket.gethostname(), boot_id=boot_id(), pid_namespace=namespace)


_identity: tuple[int, Identity | None] | None = None


def owner_identity() -> Identity | None:
    """This process's `Identity` (cached per process); ``None`` without ``/proc``."""
    global _identity
    pid = os.getpid()
    if _identity is None or _identity[0] != pid:
        facts = here()
        start = process_start_time(pid)
        found = None
        if start is not None and facts.boot_id and facts.pid_namespace:
            found = Identity(facts.host, facts.boot_id, facts.pid_namespace, pid, start)
        _identity = (pid, found)
    return _identity[1]


def kill_group(pid: int, start_time: int, grace: float = 5.0) -> bool:
    """End the process group led by ``pid`` if ``pid`` still is the process that started at ``start_time``.

    SIGTERM to the group, then SIGKILL after ``grace`` seconds.  A PID that
    now belongs to another process (different start time) is never signalled.
    Returns whether a signal was sent.
    """
    if process_start_time(pid) != start_time:
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return False
    deadline = time.monotonic() + grace
    while process_start_time(pid) == start_time and time.monotonic() < deadline:
        time.sleep(0.02)
    # the leader is gone or stuck: the group id cannot have been reused while members remain
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if process_start_time(pid) in (start_time, None):
            os.killpg(pid, signal.SIGKILL)
    return True
