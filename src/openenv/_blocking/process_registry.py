"""The process registry that ``python -m openenv prune`` reads, and ``prune`` for processes.

Each server process a provider starts gets a record (`openenv._core.lifetimes.ProcessRecord`)
in `runtime_dir()`, written by `openenv._blocking.lifetimes.lease_process` and deleted
when its lease is released.  `prune_processes` lives here, beside the records it lists
(``prune`` for containers lists the engine's: `openenv._blocking.docker.prune_containers`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

from .._core.lifetimes import FORGET, KILL, ProcessRecord, decode_record, encode_record, prune_verdict, record_name
from .procfs import here, kill_group, process_start_time

__all__ = [
    "RUNTIME_DIR_ENV",
    "STALE_TEMPORARY",
    "runtime_dir",
    "write_record",
    "list_records",
    "remove_record",
    "sweep_temporary_records",
    "prune_processes",
]

#: Environment variable that overrides the directory of the process registry.
RUNTIME_DIR_ENV = "OPENENV_TWIN_RUNTIME_DIR"


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


def write_record(record: ProcessRecord) -> str | None:
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
