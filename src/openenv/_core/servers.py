"""How many servers hold N sessions, and which server a new session goes to (sans-IO).

Most of OpenEnv's environment servers hold one session (``max_concurrent_envs``
defaults to 1, and several environments hard-code it).  When the client starts
the servers itself (a Docker image, a checkout), it starts as many as the
sessions need, up to a cap:

* `servers_needed()`: ``ceil(sessions / limit)``, at most ``cap``; a limit not
  known yet counts as 1 (one server per session works with any server);
* `place()`: where the next session of a growing set goes (``environment_factory``'s
  instances arrive one by one): an existing server with room, a new server while
  under the cap, or wait;
* `limit_from()`: a server's limit, learned from its ``CAPACITY_REACHED`` error
  (``max_sessions`` in the frame's data).  OpenEnv's ``GET /metadata`` does not
  carry it (``name``, ``description``, ``readme_content``, ``version``,
  ``author``, ``documentation_url``), so that refusal is the only place it is said;
* `overcommitted()`: whether a refusal means "this client put more sessions on
  the server than it holds" (waiting cannot help) rather than "someone else holds
  the server for now".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = [
    "DEFAULT_MAX_SERVERS",
    "NEW",
    "WAIT",
    "check_max_servers",
    "servers_needed",
    "assign",
    "grow",
    "place",
    "limit_from",
    "overcommitted",
    "overcommitted_message",
    "dead_server_message",
    "RAISE_SESSION_LIMIT",
]

#: The advice for a server that holds too few sessions, true for ours and OpenEnv's servers alike
RAISE_SESSION_LIMIT: Final = (
    "raise the server's session limit (MAX_CONCURRENT_ENVS for OpenEnv's servers, "
    "--max-sessions for python -m openenv serve)"
)

#: ``environment_factory``'s default cap on the servers it starts for one class
DEFAULT_MAX_SERVERS: Final = 8

#: `place()`: start a new server for the session
NEW: Final = -1
#: `place()`: every server is full and the cap is reached: wait for a session to end
WAIT: Final = -2


def check_max_servers(value: Any) -> int | None:
    """``value`` if it is ``None`` or a positive integer; else ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_servers must be a positive integer or None (no cap), not {value!r}")
    return value


def servers_needed(sessions: int, limit: int | None, cap: int | None) -> int:
    """The servers for ``sessions`` sessions when each server holds ``limit`` (``None``: not known, taken as 1).

    At most ``cap`` (``None``: no cap), at least 1 when there are sessions.
    """
    if sessions <= 0:
        return 0
    per = limit if limit is not None and limit > 0 else 1
    needed = -(-sessions // per)
    return needed if cap is None else max(1, min(needed, cap))


def assign(sessions: int, servers: int) -> list[int]:
    """The server of each session: round-robin, so the servers carry as even a load as can be."""
    if servers < 1:
        raise ValueError("assign needs at least one server")
    return [index % servers for index in range(sessions)]


def grow(loads: Sequence[int], sessions: int, cap: int | None) -> list[int]:
    """The server of each of ``sessions`` new sessions, given the running servers' ``loads``.

    A new server per session while there are fewer than ``cap`` (its index
    counts on from ``len(loads)``), then the least loaded server (the lowest
    index on a tie).
    """
    current = list(loads)
    chosen: list[int] = []
    for _ in range(sessions):
        if cap is None or len(current) < cap:
            current.append(1)
            chosen.append(len(current) - 1)
        else:
            index = min(range(len(current)), key=lambda k: (current[k], k))
            current[index] += 1
            chosen.append(index)
    return chosen


def place(loads: Sequence[int], limit: int | None, cap: int | None) -> int:
    """Where the next session goes, given each running server's sessions (``loads``).

    * no server yet: `NEW`;
    * ``limit`` not known: the least loaded server (they are shared until one
      says it is full);
    * a server below ``limit``: the least loaded one (the lowest index on a tie);
    * all full, fewer than ``cap`` servers: `NEW`;
    * all full at the cap: `WAIT`.
    """
    if not loads:
        return NEW
    order = sorted(range(len(loads)), key=lambda index: (loads[index], index))
    if limit is None:
        return order[0]
    if loads[order[0]] < limit:
        return order[0]
    if cap is None or len(loads) < cap:
        return NEW
    return WAIT


def limit_from(details: Mapping[str, Any]) -> int | None:
    """The ``max_sessions`` a ``CAPACITY_REACHED`` error carries (``None`` when absent or not a positive integer)."""
    value = details.get("max_sessions")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def overcommitted(ours: int, limit: int | None) -> bool:
    """Whether ``ours`` sessions of this client on one server exceed its known ``limit`` (waiting cannot help)."""
    return limit is not None and ours > limit


def overcommitted_message(sessions: int, servers: int, limit: int, cap: int | None) -> str:
    """What to do when ``sessions`` sessions on ``servers`` servers exceed a server's ``limit``."""
    needed = servers_needed(sessions, limit, None)
    capped = f" (max_servers={cap})" if cap is not None else ""
    return (
        f"the server holds {limit} session(s) and {sessions} sessions on {servers} server(s){capped} put "
        f"{-(-sessions // servers)} on each: pass max_servers={needed} (or more), use fewer sessions, "
        f"or {RAISE_SESSION_LIMIT}"
    )


def dead_server_message(reason: str, *, replaced_by: str) -> str:
    """What to do when the server a client started died (``reason``: what its provider said).

    ``replaced_by`` says what brings a new server: ``"the next reset()"``
    (``environment_factory``), ``"pool.replace(i)"`` (a pool), or
    ``"a new client"`` (an ``Env`` that owns its server, where ``reset()``
    would only reach the dead address again).
    """
    if replaced_by == "a new client":
        advice = (
            "reset() cannot bring it back: close this client and start a new one (EnvPool(..., "
            "on_failure='replace') and environment_factory replace a dead server themselves)"
        )
    else:
        advice = f"{replaced_by} starts a new server"
    return f"the server this client started died, and its episode with it; {advice}. {reason}"
