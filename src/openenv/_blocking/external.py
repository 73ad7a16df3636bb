"""Local records of servers started by a provider this library does not control (a cloud sandbox).

An `openenv.sync.OpenEnvProvider` wrapping a provider of another package
(Daytona, Modal, a team's own cluster, ...) cannot hand its sandbox to the
reaper: only the provider's own ``stop`` can remove it, and that needs the
provider object, which dies with the program.  So each started sandbox gets:

* an ``atexit`` cleanup (the provider's ``stop``) when the client is never closed;
* a record in the registry folder (`openenv._blocking.process_registry.runtime_dir`),
  ``external-<owner pid>-<n>.json``, deleted when it is stopped, that
  ``python -m openenv prune --dry-run`` lists.  After a SIGKILL of its owner
  the record says which provider started what and when; the sandbox itself
  lives on until the provider's own lifetime ends (or is removed in its
  console).  ``prune`` (without ``--dry-run``) lists it and drops the record.

No URL is ever written (a cloud URL is often a bearer capability): only the
provider's class, a description without secrets and the owner's identity.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import lifetimes as _lifetimes
from .process_registry import runtime_dir
from .procfs import process_start_time

__all__ = ["ExternalRecord", "ExternalLease", "lease_external", "list_external", "prune_external"]

_counter = itertools.count(1)


@dataclass(frozen=True)
class ExternalRecord:
    """What a record says: who started which provider's server, and when.

    Attributes:
        provider: the provider's class, ``module.Class``.
        description: what was started (the image or project, never a URL).
        owner_pid: the process that started it.
        owner_start_time: that process's start time (``/proc``), or 0 when unknown.
        created: when (seconds since the epoch).
        path: the record's file.
    """

    provider: str
    description: str
    owner_pid: int
    owner_start_time: int
    created: float
    path: str

    @property
    def owner_alive(self) -> bool:
        """Whether the owner process still runs (its PID with the same start time)."""
        now = process_start_time(self.owner_pid)
        if now is None:
            return False
        return self.owner_start_time in (0, now)


class ExternalLease:
    """A started external server: ``release()`` once its provider stopped it (idempotent)."""

    def __init__(self, lease: _lifetimes.Lease, path: str | None) -> None:
        self._lease = lease
        self._path = path

    def release(self) -> None:
        """No atexit cleanup any more, and the record deleted."""
        self._lease.release()
        path, self._path = self._path, None
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)


def lease_external(provider: str, description: str, cleanup: Callable[[], None]) -> ExternalLease:
    """Register an external server: ``cleanup`` runs at interpreter exit unless released; a record for ``prune``.

    Args:
        provider: the provider's class, ``module.Class``.
        description: what was started, without secrets (no URL).
        cleanup: stops it (the provider's own ``stop``).
    """
    lease = _lifetimes.Lease(_lifetimes._track(cleanup), None, None)
    folder = runtime_dir(create=True)
    path = None
    if folder is not None:
        pid = os.getpid()
        path = os.path.join(folder, f"external-{pid}-{next(_counter)}.json")
        body = {
            "provider": provider,
            "description": description,
            "owner_pid": pid,
            "owner_start_time": process_start_time(pid) or 0,
            "created": time.time(),
        }
        temporary = f"{path}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump(body, handle)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            path = None
    return ExternalLease(lease, path)


def list_external() -> list[ExternalRecord]:
    """Every well-formed external record in the registry folder."""
    folder = runtime_dir()
    if folder is None:
        return []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        if not (name.startswith("external-") and name.endswith(".json")):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as handle:
                body = json.load(handle)
            found.append(
                ExternalRecord(
                    provider=str(body["provider"]),
                    description=str(body["description"]),
                    owner_pid=int(body["owner_pid"]),
                    owner_start_time=int(body["owner_start_time"]),
                    created=float(body["created"]),
                    path=path,
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def prune_external(*, dry_run: bool = False) -> list[tuple[ExternalRecord, str]]:
    """Each external record with its verdict: ``keep`` (owner alive) or ``orphan`` (owner gone).

    Nothing can be removed from here (only the provider's own ``stop`` can);
    without ``dry_run`` the records of orphans are deleted once listed.
    """
    results = []
    for record in list_external():
        verdict = "keep" if record.owner_alive else "orphan"
        if verdict == "orphan" and not dry_run:
            with contextlib.suppress(OSError):
                os.unlink(record.path)
        results.append((record, verdict))
    return results
