"""Nothing the SDK starts outlives the program: atexit cleanup, the reaper, the process registry.

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
* `lease_process()` also writes a record to the process registry (see
  `runtime_dir()`) that ``python -m openenv prune`` reads;
* a server process holds this process's **lifeline** (`lifeline_fd()`) from
  the moment it is forked, before anything above happened: the read end of a
  pipe whose write end only the owner holds.  A watcher left in the server's
  process group ends the group on EOF, so a server cannot outlive its owner even
  when the owner is killed between the fork and the registration
  (`openenv._blocking.process.start_process`).

PIDs are reused, so a process is only ever signalled after its start time (from
``/proc/<pid>/stat``) was checked against the recorded one.  On systems without
``/proc`` the reaper and the registry do nothing for processes (atexit still works).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from .._core.lifetimes import (
    FORGET,
    KILL,
    REMOVE,
    Here,
    Identity,
    ProcessRecord,
    container_verdict,
    decode_record,
    encode_message,
    encode_record,
    parse_start_time,
    prune_verdict,
    record_name,
)

__all__ = [
    "Lease",
    "lease_process",
    "lease_container",
    "process_start_time",
    "boot_id",
    "here",
    "owner_identity",
    "runtime_dir",
    "list_records",
    "remove_record",
    "kill_group",
    "lifeline_fd",
    "sweep_temporary_records",
    "prune_processes",
    "prune_containers",
    "RUNTIME_DIR_ENV",
]

#: Environment variable that overrides the directory of the process registry.
RUNTIME_DIR_ENV = "OPENENV_TWIN_RUNTIME_DIR"

# --------------------------------------------------------------------------- /proc facts


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


# --------------------------------------------------------------------------- the process registry


def runtime_dir(create: bool = False) -> str | None:
    """The registry directory: ``$OPENENV_TWIN_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/openenv-twin``,
    else ``<tmp>/openenv-twin-<uid>``.

    With ``create``, it is made (mode 0700); a directory owned by another user,
    or a symlink, is refused (``None``).
    """
    chosen = os.environ.get(RUNTIME_DIR_ENV)
    if not chosen:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isdir(xdg):
            chosen = os.path.join(xdg, "openenv-twin")
        else:
            uid = os.getuid() if hasattr(os, "getuid") else 0
            chosen = os.path.join(tempfile.gettempdir(), f"openenv-twin-{uid}")
    if create:
        with contextlib.suppress(FileExistsError):
            os.makedirs(chosen, mode=0o700)
    try:
        info = os.lstat(chosen)
    except OSError:
        return None
    import stat as _statmod

    if not _statmod.S_ISDIR(info.st_mode) or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
        return None
    return chosen


def _write_record(record: ProcessRecord) -> str | None:
    folder = runtime_dir(create=True)
    if folder is None:
        return None
    path = os.path.join(folder, record_name(record.pid, record.start_time))
    # written aside, then renamed: a reader never sees half a record; a writer killed mid-write leaves
    # ``<name>.<its pid>.tmp``, which `sweep_temporary_records()` removes once that pid is gone
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(encode_record(record))
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return None
    return path


#: A temporary record older than this (seconds) is stale even if a process with its writer's PID runs.
STALE_TEMPORARY = 60.0


def sweep_temporary_records(writer: int | None = None) -> list[str]:
    """Delete the registry's temporary files (``*.json.<pid>.tmp``) of writers that are gone.

    Args:
        writer: only those of this PID, known to be dead (the reaper's owner).
            ``None``: those whose writer no longer runs, or older than
            `STALE_TEMPORARY` seconds (the PID may have been reused).

    Returns:
        The names deleted.
    """
    folder = runtime_dir()
    if folder is None:
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    now = time.time()
    for name in names:
        stem, dot, tail = name.removesuffix(".tmp").rpartition(".")
        if not (name.startswith("process-") and name.endswith(".tmp") and dot and tail.isdigit()):
            continue
        if not stem.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        if writer is not None:
            stale = int(tail) == writer
        else:
            try:
                age = now - os.lstat(path).st_mtime
            except OSError:
                continue
            stale = process_start_time(int(tail)) is None or age > STALE_TEMPORARY
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(path)
                removed.append(name)
    return removed


def remove_record(pid: int, start_time: int) -> None:
    """Delete the registry record of a process (if any)."""
    folder = runtime_dir()
    if folder is not None:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, record_name(pid, start_time)))


def list_records() -> list[ProcessRecord]:
    """Every well-formed record in the registry."""
    folder = runtime_dir()
    if folder is None:
        return []
    found = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        if not (name.startswith("process-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                record = decode_record(handle.read())
        except OSError:
            continue
        if record is not None:
            found.append(record)
    return found


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
    written = _write_record(record)
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


def prune_processes(*, everything: bool = False, dry_run: bool = False) -> list[tuple[ProcessRecord, str]]:
    """Apply ``prune`` to the process registry; return each record with its verdict.

    Verdicts (`openenv._core.lifetimes`): ``keep`` (its owner is alive),
    ``forget`` (the process is gone or its PID was reused: only the record is
    deleted), ``kill`` (its group is ended and the record deleted), ``foreign``
    (written in another PID namespace or on another host: left alone, even with
    ``everything``).  With ``dry_run`` nothing is changed.  Temporary files of
    writers killed mid-write are deleted too.
    """
    facts = here()
    results = []
    if not dry_run:
        sweep_temporary_records()
    for record in list_records():
        verdict = prune_verdict(
            record,
            start_time_now=process_start_time(record.pid),
            owner_start_time_now=process_start_time(record.owner_pid),
            boot_id_now=facts.boot_id,
            everything=everything,
            here=facts,
        )
        if not dry_run and verdict in (KILL, FORGET):
            if verdict == KILL:
                kill_group(record.pid, record.start_time)
            remove_record(record.pid, record.start_time)
        results.append((record, verdict))
    return results


def prune_containers(
    client: Any, *, everything: bool = False, dry_run: bool = False, label_filters: Sequence[str] = ()
) -> list[tuple[Any, str, str]]:
    """Apply ``prune`` to the engine's managed containers; return each with its verdict and why.

    Args:
        client: a docker-py client.
        everything: ``--all``: remove every container labelled ``org.openenv.managed=1``.
        dry_run: change nothing.
        label_filters: only containers that also carry these ``key=value`` labels.

    Verdicts (`openenv._core.lifetimes.container_verdict`): ``keep`` (its owner
    runs), ``remove`` (it provably belongs to a dead program of this host, boot
    and PID namespace; removed unless ``dry_run``), ``foreign`` (anything else:
    another host, boot or namespace, or labels without a full owner identity;
    left alone unless ``everything``).

    Raises:
        ProviderError: listing failed, or a removal failed (after every other
            container was tried).
    """
    from .._core.errors import ProviderError
    from . import docker as _docker

    facts = here()
    results: list[tuple[Any, str, str]] = []
    failures = []
    for summary in _docker.list_managed(client, label_filters=label_filters):
        pid = summary.pid
        start_now = process_start_time(pid) if pid is not None else None
        verdict, why = container_verdict(summary.labels, here=facts, start_time_now=start_now, everything=everything)
        if verdict == REMOVE and not dry_run:
            try:
                _docker.remove_container(client, summary.id)
            except ProviderError as exc:
                failures.append(f"{summary.name}: {exc}")
        results.append((summary, verdict, why))
    if failures:
        raise ProviderError("could not remove: " + "; ".join(failures))
    return results
