"""Rules for making sure nothing the SDK starts outlives the program: no IO here.

Three layers (the IO is in `openenv._blocking.lifetimes` and `openenv._reaper`):

* ``atexit``: a client never closed stops its server when the interpreter exits;
* the reaper: a watcher process holding a pipe from its owner; on EOF (the owner
  died, even by SIGKILL) it removes what is still registered;
* the process registry: one JSON record per local server, so that
  ``python -m openenv prune`` finds servers whose owner is gone.

A PID alone is never trusted (PIDs are reused): a process is identified by its
PID *and* its start time (field 22 of ``/proc/<pid>/stat``, clock ticks since
boot), plus the boot id for records that may survive a reboot.  A PID only means
something in the PID namespace of the kernel it was read on, so an owner is an
`Identity`: host, boot id, PID namespace, PID and start time.  Containers carry
their owner's identity as labels (`identity_labels()`); one rule
(`owner_state()`) decides, for a process record and for a container alike,
whether the owner is alive, dead, or not ours to judge.
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
    "Identity",
    "Here",
    "ALIVE",
    "DEAD",
    "FOREIGN",
    "owner_state",
    "identity_labels",
    "identity_from_labels",
    "REMOVE",
    "container_verdict",
    "shorten_command",
    "LABEL_HOST",
    "LABEL_BOOT_ID",
    "LABEL_PID_NAMESPACE",
    "LABEL_PID_START",
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
        host: the owner's host name (``""``: not recorded).
        pid_namespace: the owner's PID namespace (``""``: not recorded); the
            PIDs of the record mean nothing in another one.
    """

    pid: int
    start_time: int
    owner_pid: int
    owner_start_time: int
    boot_id: str = ""
    command: Sequence[str] = field(default_factory=tuple)
    created: float = 0.0
    host: str = ""
    pid_namespace: str = ""


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
            host=str(data.get("host") or ""),
            pid_namespace=str(data.get("pid_namespace") or ""),
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
REMOVE = "remove"  # a container whose owner is gone (or --all): remove it
FOREIGN = "foreign"  # not provably ours to judge (another host, boot or PID namespace; no identity): left alone

# --------------------------------------------------------------------------- owners

ALIVE = "alive"
DEAD = "dead"


@dataclass(frozen=True)
class Here:
    """Where ``prune`` (or the reaper) runs: the facts an owner's identity is compared with.

    Attributes:
        host: the host name.
        boot_id: the kernel's boot id (``""`` if unknown).
        pid_namespace: the PID namespace, as ``/proc/self/ns/pid`` names it
            (``pid:[4026531836]``; ``""`` if unknown).
    """

    host: str
    boot_id: str
    pid_namespace: str


@dataclass(frozen=True)
class Identity:
    """Who started something: a process of one PID namespace of one boot of one host.

    Attributes:
        host: the owner's host name.
        boot_id: its kernel's boot id.
        pid_namespace: its PID namespace (``pid:[<inode>]``).
        pid: its PID (in that namespace).
        start_time: its start time, clock ticks since boot.
    """

    host: str
    boot_id: str
    pid_namespace: str
    pid: int
    start_time: int


def owner_state(owner: Identity, here: Here, start_time_now: int | None) -> tuple[str, str]:
    """Whether ``owner`` is alive, from facts read ``here``: ``(ALIVE | DEAD | FOREIGN, why)``.

    Args:
        owner: the recorded identity (a field ``""`` means: not recorded, which
            only a process record written by an older version may lack; a
            container without its identity never gets here).
        here: where the verdict is made.
        start_time_now: the start time of the process with ``owner.pid`` here
            (``None``: no such process).

    The one liveness rule, for process records (the server and its owner,
    `prune_verdict`) and containers (`container_verdict`): an owner of this
    host, boot and PID namespace is alive exactly when a process with its PID
    runs *and* started when it did (PIDs are reused).  Anything of another
    host, boot or PID namespace is `FOREIGN`: its PID means nothing here.
    """
    for what, theirs, ours in (
        ("another host", owner.host, here.host),
        ("another boot", owner.boot_id, here.boot_id),
        ("another PID namespace", owner.pid_namespace, here.pid_namespace),
    ):
        if theirs and theirs != ours:
            return FOREIGN, f"{what} ({theirs})"
        if theirs and not ours:
            return FOREIGN, f"{what}? ({theirs}; unknown here)"
    if start_time_now is not None and start_time_now == owner.start_time:
        return ALIVE, f"owner pid {owner.pid} alive"
    if start_time_now is None:
        return DEAD, f"owner pid {owner.pid} gone"
    return DEAD, f"owner pid {owner.pid} gone (pid reused)"


def prune_verdict(
    record: ProcessRecord,
    *,
    start_time_now: int | None,
    owner_start_time_now: int | None,
    boot_id_now: str,
    everything: bool = False,
    here: Here | None = None,
) -> str:
    """What ``prune`` does with a process record, from the facts read just now.

    Args:
        start_time_now: the start time of the process with the record's PID now
            (``None``: no such process).
        owner_start_time_now: the same for the owner's PID.
        boot_id_now: the current boot id (``""`` if unknown).
        everything: ``--all``: also servers whose owner is alive.
        here: this host and PID namespace (``None``: only the boot id is compared).

    The server and its owner are judged by `owner_state()`, the rule for
    containers too: a PID counts only with its recorded start time, so a
    process whose start time differs from the record's is never killed, and
    nothing is done to the record of another host or PID namespace
    (`FOREIGN`, even with ``everything``: its PIDs mean nothing here).
    """
    if record.boot_id and boot_id_now and record.boot_id != boot_id_now:
        return FORGET  # that boot is over: none of its processes runs
    # The boot was compared above (a record may lack it, or this host not know it); host and
    # namespace are compared when ``here`` is given (a record written before it recorded them has "").
    facts = Here(here.host, "", here.pid_namespace) if here is not None else Here("", "", "")
    host, namespace = (record.host, record.pid_namespace) if here is not None else ("", "")
    server, _ = owner_state(Identity(host, "", namespace, record.pid, record.start_time), facts, start_time_now)
    if server == FOREIGN:
        return FOREIGN
    if server == DEAD:
        return FORGET  # gone, or its PID now belongs to another process: never killed
    owner = Identity(host, "", namespace, record.owner_pid, record.owner_start_time)
    if owner_state(owner, facts, owner_start_time_now)[0] == ALIVE and not everything:
        return KEEP
    return KILL


# --------------------------------------------------------------------------- container identity

#: The owner's host name.
LABEL_HOST = "org.openenv.host"
#: The owner's kernel boot id.
LABEL_BOOT_ID = "org.openenv.boot-id"
#: The owner's PID namespace (``pid:[<inode>]``).
LABEL_PID_NAMESPACE = "org.openenv.pid-namespace"
#: The owner's start time (clock ticks since boot); its PID is ``org.openenv.pid``.
LABEL_PID_START = "org.openenv.pid-start"
_LABEL_PID = "org.openenv.pid"  # = openenv._core.containers.LABEL_PID


def identity_labels(owner: Identity) -> dict[str, str]:
    """The labels that say who started a container."""
    return {
        LABEL_HOST: owner.host,
        LABEL_BOOT_ID: owner.boot_id,
        LABEL_PID_NAMESPACE: owner.pid_namespace,
        _LABEL_PID: str(owner.pid),
        LABEL_PID_START: str(owner.start_time),
    }


def identity_from_labels(labels: Mapping[str, str]) -> Identity | None:
    """The owner a container's labels name; ``None`` unless every part is there and well-formed."""
    host, boot, namespace = (labels.get(k) or "" for k in (LABEL_HOST, LABEL_BOOT_ID, LABEL_PID_NAMESPACE))
    pid, start = labels.get(_LABEL_PID) or "", labels.get(LABEL_PID_START) or ""
    if not (host and boot and namespace and pid.isdigit() and start.isdigit()):
        return None
    return Identity(host, boot, namespace, int(pid), int(start))


def container_verdict(
    labels: Mapping[str, str],
    *,
    here: Here,
    start_time_now: int | None,
    everything: bool = False,
) -> tuple[str, str]:
    """What ``prune`` does with a managed container: ``(KEEP | REMOVE | FOREIGN, why)``.

    Args:
        labels: the container's labels.
        here: where ``prune`` runs.
        start_time_now: the start time here of the process with the PID its
            labels name (``None``: no such process, or no PID label).
        everything: ``--all``: remove every managed container.

    Only a container that provably belongs to a dead program of this host,
    boot and PID namespace is removed.  One without a complete identity (a
    look-alike that carries ``org.openenv.managed=1``, or one made by an older
    version) and one of another host, boot or namespace is `FOREIGN`: listed,
    left alone.  ``everything`` removes both kinds too.
    """
    owner = identity_from_labels(labels)
    if owner is None:
        return (REMOVE if everything else FOREIGN), "no owner identity"
    state, why = owner_state(owner, here, start_time_now)
    if everything:
        return REMOVE, why
    return {ALIVE: KEEP, DEAD: REMOVE}.get(state, FOREIGN), why


def shorten_command(command: Sequence[str], width: int = 60) -> str:
    """A command line for a listing, at most ``width`` characters, cut between words with ``…``.

    A first word longer than ``width`` is shown whole (cutting it would show a
    wrong path or number).
    """
    text = " ".join(command)
    if len(text) <= width:
        return text
    kept = ""
    for word in text.split(" "):
        candidate = f"{kept} {word}" if kept else word
        if len(candidate) + 2 > width and kept:
            break
        kept = candidate
        if len(kept) + 2 > width:
            break
    return kept + " …"


# --------------------------------------------------------------------------- the reaper's pipe protocol
#
# One line per message, ASCII, space-separated:
#   "+c <container name> <session id> [<image>]"   register a container (by its unique name)
#   "-c <container name> <session id> [<image>]"   unregister it
#   "+p <pid> <start time>"                        register a process group
#   "-p <pid> <start time>"                        unregister it


def encode_message(op: str, kind: str, first: str | int, second: str | int, third: str = "") -> bytes:
    """One message line (``op`` is ``+`` or ``-``, ``kind`` is ``c`` or ``p``; ``third``: a container's image)."""
    if op not in "+-" or len(op) != 1 or kind not in ("c", "p"):
        raise ValueError(f"bad reaper message {op}{kind}")
    a, b = str(first), str(second)
    if not a or not b or any(ch.isspace() for ch in a + b + third) or (third and kind != "c"):
        raise ValueError("reaper message fields must be non-empty and contain no spaces")
    return (f"{op}{kind} {a} {b} {third}" if third else f"{op}{kind} {a} {b}").encode("ascii") + b"\n"


def parse_message(line: bytes) -> tuple[str, str, str, str, str] | None:
    """``(op, kind, first, second, third)`` of a message line; ``None`` when malformed.

    ``third`` (a container's image) is ``""`` when absent.
    """
    try:
        head, first, second, *rest = line.decode("ascii").split()
    except (UnicodeDecodeError, ValueError):
        return None
    if len(head) != 2 or head[0] not in "+-" or head[1] not in "cp" or len(rest) > (1 if head[1] == "c" else 0):
        return None
    if head[1] == "p" and not (first.isdigit() and second.isdigit()):
        return None
    return head[0], head[1], first, second, rest[0] if rest else ""
