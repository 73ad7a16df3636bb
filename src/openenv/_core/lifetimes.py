"""Rules for making sure nothing the SDK starts outlives the program: no IO here.

Three layers (the IO is in `openenv._blocking.lifetimes` and `openenv._reaper`):

* ``atexit``: a client never closed stops its server when the interpreter exits;
* the reaper: a watcher process holding a pipe from its owner; on EOF (the owner
  died, even by SIGKILL) it removes what is still registered;
* the process registry: one JSON record per local server, so that
  ``python -m openenv prune`` finds servers whose owner is gone.

A PID alone is never trusted (PIDs are reused): a process is identified by its
PID *and* its start time (field 22 of ``/proc/<pid>/stat``, clock ticks since
boot), plus the boot id for records that may survive a reboot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "ProcessRecord",
    "parse_start_time",
    "record_name",
    "encode_record",
    "decode_record",
    "prune_verdict",
    "KEEP",
    "FORGET",
    "KILL",
    "encode_message",
    "parse_message",
]


def parse_start_time(stat: str) -> int | None:
    """The start time (field 22) of a ``/proc/<pid>/stat`` line; ``None`` if malformed.

    The command name (field 2) may contain spaces and parentheses, so fields are
    counted from the last ``)``.
    """
    _, paren, rest = stat.rpartition(")")
    if not paren:
        return None
    fields = rest.split()
    # rest starts at field 3 (state); field 22 is index 19
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcessRecord:
    """A local server process started by this SDK (one JSON file in the registry).

    Attributes:
        pid: the server's PID (also its process group id: it leads its own session).
        start_time: its start time in clock ticks since boot.
        owner_pid: the PID of the program that started it.
        owner_start_time: the owner's start time.
        boot_id: the kernel boot id when it was started (``""`` if unknown).
        command: the command line.
        created: Unix time of the start.
    """

    pid: int
    start_time: int
    owner_pid: int
    owner_start_time: int
    boot_id: str = ""
    command: Sequence[str] = field(default_factory=tuple)
    created: float = 0.0


def record_name(pid: int, start_time: int) -> str:
    """The registry file name of a process."""
    return f"process-{pid}-{start_time}.json"


def encode_record(record: ProcessRecord) -> str:
    data = asdict(record)
    data["command"] = list(record.command)
    return json.dumps(data, sort_keys=True)


def decode_record(text: str) -> ProcessRecord | None:
    """A record from its JSON text; ``None`` when it is not one."""
    try:
        data: Any = json.loads(text)
        if not isinstance(data, Mapping):
            return None
        return ProcessRecord(
            pid=_int(data["pid"]),
            start_time=_int(data["start_time"]),
            owner_pid=_int(data["owner_pid"]),
            owner_start_time=_int(data["owner_start_time"]),
            boot_id=str(data.get("boot_id") or ""),
            command=tuple(str(part) for part in data.get("command") or ()),
            created=float(data.get("created") or 0.0),
        )
    except (ValueError, KeyError, TypeError):
        return None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a non-negative integer: {value!r}")
    return value


KEEP = "keep"  # the owner is alive (and --all was not given)
FORGET = "forget"  # the process is gone (or the PID now belongs to another process): drop the record only
KILL = "kill"  # a live server whose owner is gone (or --all): kill its group and drop the record


def prune_verdict(
    record: ProcessRecord,
    *,
    start_time_now: int | None,
    owner_start_time_now: int | None,
    boot_id_now: str,
    everything: bool = False,
) -> str:
    """What ``prune`` does with a record, from the facts read just now.

    Args:
        start_time_now: the start time of the process with the record's PID now
            (``None``: no such process).
        owner_start_time_now: the same for the owner's PID.
        boot_id_now: the current boot id (``""`` if unknown).
        everything: ``--all``: also servers whose owner is alive.

    A process whose start time differs from the record's is never killed.
    """
    if record.boot_id and boot_id_now and record.boot_id != boot_id_now:
        return FORGET
    if start_time_now is None or start_time_now != record.start_time:
        return FORGET
    owner_alive = owner_start_time_now is not None and owner_start_time_now == record.owner_start_time
    if owner_alive and not everything:
        return KEEP
    return KILL


# --------------------------------------------------------------------------- the reaper's pipe protocol
#
# One line per message, ASCII, space-separated:
#   "+c <container name> <session id>"   register a container (by its unique name)
#   "-c <container name> <session id>"   unregister it
#   "+p <pid> <start time>"              register a process group
#   "-p <pid> <start time>"              unregister it


def encode_message(op: str, kind: str, first: str | int, second: str | int) -> bytes:
    """One message line (``op`` is ``+`` or ``-``, ``kind`` is ``c`` or ``p``)."""
    if op not in "+-" or len(op) != 1 or kind not in ("c", "p"):
        raise ValueError(f"bad reaper message {op}{kind}")
    a, b = str(first), str(second)
    if not a or not b or any(ch.isspace() for ch in a + b):
        raise ValueError("reaper message fields must be non-empty and contain no spaces")
    return f"{op}{kind} {a} {b}\n".encode("ascii")


def parse_message(line: bytes) -> tuple[str, str, str, str] | None:
    """``(op, kind, first, second)`` of a message line; ``None`` when malformed."""
    try:
        head, first, second = line.decode("ascii").split()
    except (UnicodeDecodeError, ValueError):
        return None
    if len(head) != 2 or head[0] not in "+-" or head[1] not in "cp":
        return None
    if head[1] == "p" and not (first.isdigit() and second.isdigit()):
        return None
    return head[0], head[1], first, second
