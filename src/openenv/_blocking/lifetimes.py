"""Nothing the SDK starts outlives the program: the leases, atexit cleanup and the reaper link.

Shared by both twins (blocking code, no event loop: it also runs at interpreter
exit, when no loop is left).  Providers take a `Lease` for each server
they start and release it when they stop it:

* `lease_process()` / `lease_container()` register a cleanup run at
  interpreter exit (``atexit``) if the client was never closed;
* they register the process (PID and start time) or the container (name and
  session) with the **reaper**, a small watcher process (``python -m
  openenv._reaper``) started on first use, one per owner process, that holds a
  pipe from its owner: when the owner dies, even by SIGKILL, the pipe reaches
  EOF and the reaper removes what is still registered, then exits;
* `lease_process()` also writes a record to the process registry
  (`openenv._blocking.process_registry`) that ``python -m openenv prune`` reads;
* a server process holds this process's **lifeline** (`lifeline_fd()`) from
  the moment it is forked, before anything above happened: the read end of a
  pipe whose write end only the owner holds.  A watcher left in the server's
  process group ends the group on EOF, so a server cannot outlive its owner even
  when the owner is killed between the fork and the registration
  (`openenv._blocking.process.start_process`).

The facts it reads about processes are `openenv._blocking.procfs`'s; ``prune``
lives beside what it lists (`process_registry.prune_processes`,
`docker.prune_containers`).  On systems without ``/proc`` the reaper and the
registry do nothing for processes (atexit still works).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO

from .._core.lifetimes import ProcessRecord, encode_message
from .process_registry import remove_record, write_record
from .procfs import here, process_start_time

__all__ = ["Lease", "lease_process", "lease_container", "lifeline_fd"]

# --------------------------------------------------------------------------- the reaper link

_lock = threading.RLock()
_reaper: subprocess.Popen[bytes] | None = None
_reaper_owner = 0
_registered: dict[bytes, None] = {}  # the "+..." lines the current reaper must know
_orphans: list[subprocess.Popen[bytes]] = []  # inherited across fork: never waited for
_lifeline: tuple[int, int] | None = None  # (read end, write end) of this process's lifeline pipe
_lifeline_owner = 0


def lifeline_fd() -> int | None:
    """The read end of this process's lifeline, for a server process to inherit (``None`` off POSIX).

    One pipe per process, made on first use and kept open until the process
    ends: nothing is ever written to it, and only this process holds its write
    end (close-on-exec; a forked child closes its copy), so a reader sees EOF
    exactly when this process is gone, however it died.  Both ends are
    file descriptors 10 or above, so a shell can never confuse them with the
    standard ones.
    """
    global _lifeline, _lifeline_owner
    if os.name != "posix":
        return None
    with _lock:
        if _lifeline is None or _lifeline_owner != os.getpid():
            import fcntl

            read, write = os.pipe()
            try:
                high = (fcntl.fcntl(read, fcntl.F_DUPFD_CLOEXEC, 10), fcntl.fcntl(write, fcntl.F_DUPFD_CLOEXEC, 10))
            finally:
                os.close(read)
                os.close(write)
            _lifeline, _lifeline_owner = high, os.getpid()
        return _lifeline[0]


def _spawn_reaper() -> subprocess.Popen[bytes] | None:
    if not sys.executable or os.name != "posix":
        return None
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "openenv._reaper", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=env,
            start_new_session=True,
        )
    except OSError:
        return None


def _send(line: bytes, remember: bool | None) -> None:
    """Send one line to this process's reaper (started on first use, restarted if it died)."""
    global _reaper, _reaper_owner
    with _lock:
        if remember is True:
            _registered[line] = None
        elif remember is False:
            _registered.pop(b"+" + line[1:], None)
        for _ in range(2):
            reaper = _reaper
            fresh = False
            if reaper is None or _reaper_owner != os.getpid() or reaper.poll() is not None:
                if remember is False:
                    return  # nothing to tell a new reaper
                reaper = _spawn_reaper()
                if reaper is None:
                    return
                _reaper, _reaper_owner, fresh = reaper, os.getpid(), True
            stream: IO[bytes] | None = reaper.stdin
            try:
                assert stream is not None
                stream.write(b"".join(_registered) if fresh else line)
                stream.flush()
                return
            except (OSError, ValueError):
                _close_reaper(wait=0.0)


def _close_reaper(wait: float) -> None:
    global _reaper
    with _lock:
        reaper, _reaper = _reaper, None
    if reaper is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if reaper.stdin is not None:
            reaper.stdin.close()
    try:
        reaper.wait(wait)
    except subprocess.TimeoutExpired:
        reaper.returncode = 0  # it finishes on its own (it was told EOF); no "still running" warning
        _orphans.append(reaper)


def _after_fork_in_child() -> None:
    # the child must not hold the parent's pipe open (the reaper would wait for it too)
    global _reaper, _lock, _lifeline
    _lock = threading.RLock()
    lifeline, _lifeline = _lifeline, None
    if lifeline is not None:  # the parent's servers must not wait for this child too
        for fd in lifeline:
            with contextlib.suppress(OSError):
                os.close(fd)
    reaper, _reaper = _reaper, None
    _registered.clear()
    _cleanups.clear()
    if reaper is not None:
        if reaper.stdin is not None:
            with contextlib.suppress(OSError):
                os.close(reaper.stdin.fileno())
        reaper.returncode = 0
        _orphans.append(reaper)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

# --------------------------------------------------------------------------- atexit

_cleanups: dict[int, Callable[[], None]] = {}
_next_token = 0
_atexit_installed = False


def _at_exit() -> None:
    while True:
        with _lock:
            if not _cleanups:
                break
            token = next(reversed(_cleanups))
            cleanup = _cleanups.pop(token)
        try:
            cleanup()
        except BaseException as exc:  # noqa: BLE001 - keep stopping the others
            with contextlib.suppress(Exception):
                print(f"openenv: could not stop a server at exit: {exc}", file=sys.stderr)
    _close_reaper(wait=10.0)


def _track(cleanup: Callable[[], None]) -> int:
    global _next_token, _atexit_installed
    with _lock:
        if not _atexit_installed:
            atexit.register(_at_exit)
            _atexit_installed = True
        _next_token += 1
        _cleanups[_next_token] = cleanup
        return _next_token


class Lease:
    """A started server that must not outlive this program; `release()` once it is stopped."""

    def __init__(self, token: int, line: bytes | None, record: tuple[int, int] | None) -> None:
        self._token = token
        self._line = line
        self._record = record
        self._released = False

    def release(self) -> None:
        """Forget it: no atexit cleanup, unregistered from the reaper, registry record deleted. Idempotent."""
        with _lock:
            if self._released:
                return
            self._released = True
            _cleanups.pop(self._token, None)
        if self._line is not None:
            _send(b"-" + self._line[1:], remember=False)
        if self._record is not None:
            remove_record(*self._record)


def lease_process(pid: int, command: Sequence[str], cleanup: Callable[[], None]) -> Lease:
    """Register a started server process (the leader of its own process group).

    Args:
        pid: its PID.
        command: its command line (for the registry record).
        cleanup: stops it; run at interpreter exit unless the lease was released.
    """
    token = _track(cleanup)
    start = process_start_time(pid)
    owner_start = process_start_time(os.getpid())
    if start is None or owner_start is None:  # no /proc (or it is already gone)
        return Lease(token, None, None)
    facts = here()
    record = ProcessRecord(
        pid=pid,
        start_time=start,
        owner_pid=os.getpid(),
        owner_start_time=owner_start,
        boot_id=facts.boot_id,
        command=tuple(command),
        created=time.time(),
        host=facts.host,
        pid_namespace=facts.pid_namespace,
    )
    line = encode_message("+", "p", pid, start)
    _send(line, remember=True)  # first: a record is only ever written for a process the reaper knows
    written = write_record(record)
    return Lease(token, line, (pid, start) if written else None)


def lease_container(name: str, session: str, cleanup: Callable[[], None], image: str = "") -> Lease:
    """Register a container by its unique name and session label (before it is created).

    Args:
        name: the container name.
        session: its ``org.openenv.session`` label (the reaper checks it before removing).
        cleanup: removes it; run at interpreter exit unless the lease was released.
        image: its image: lets the reaper settle a ``docker create`` still in
            flight when this program died (`openenv._blocking.docker.reap_container`).
    """
    token = _track(cleanup)
    line = encode_message("+", "c", name, session, image if image and not any(c.isspace() for c in image) else "")
    _send(line, remember=True)
    return Lease(token, line, None)
