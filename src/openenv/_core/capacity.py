"""Waiting while a server is full, sans-IO: the one backoff schedule, the budget, and the "still full" message.

Every caller that waits for room uses this policy: the pool (opening sessions,
first resets, replacements), ``environment_factory`` (an instance's first
``reset``, reading a server's tools) and the command line (``run``, ``tools``).
Its rules, each in one place:

* **What is waited for** (`waits_for_capacity`): ``CAPACITY_REACHED``, and a
  handshake refused with HTTP ``503`` (the server's cap on pending handshakes).
  A caller that knows by itself that there is no room now (every server of an
  ``environment_factory`` class is full, every session of a pool is checked
  out) asks `CapacityRetry.delay` instead.
* **The schedule** (`capacity_delays`): 0.05 s three times (a server usually
  frees a slot within moments), then doubling up to 2 s.
* **The budget** (`CapacityWait`): one ``timeout`` for a whole call; each
  waiting session takes its own `CapacityRetry` (its own backoff, the shared
  deadline). No delay runs past the deadline.
* **Giving up** (`CapacityRetry.final`): the error says how long it waited and
  with which option, then the caller's remedy (`still_full`). With a zero
  budget nothing was waited, and the server's own answer is raised unchanged.

Nothing here reads a clock: ``now`` comes in as an argument (the caller's
``time.monotonic()``), as in h11 and websockets' sans-IO protocols.  The IO
layers only sleep the delays they are given (``Deadline``, which reads the
clock, stays in ``_blocking/retry.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from .errors import CapacityReached, ConnectError, OpenEnvError, SessionBusy
from .servers import RAISE_SESSION_LIMIT

__all__ = [
    "LET_GO_AFTER",
    "backoff",
    "capacity_delays",
    "waits_for_capacity",
    "CapacityWait",
    "CapacityRetry",
    "still_full",
    "waiting_note",
    "SESSIONS_REMEDY",
    "OVERLOADED_REMEDY",
    "POOL_BUSY_REMEDY",
    "TOOLS_REMEDY",
    "instances_remedy",
]

#: Refusals of a full server that a caller opening several sessions on it waits through holding those it
#: opened (the schedule's quick retries: a server usually frees a slot within moments, and letting go makes it
#: close and create environments); from the next one on it lets go of them while it waits (no hold and wait:
#: pools sharing a server would otherwise each hold a part and wait for the rest).
LET_GO_AFTER = 3

#: the remedy for a pool's sessions (and any client) refused by a full server
SESSIONS_REMEDY = f"Use fewer sessions, close others, or {RAISE_SESSION_LIMIT}"
#: the remedy for handshakes refused with HTTP 503 (said whoever waited: it is the server's handshake cap)
OVERLOADED_REMEDY = "Open fewer sessions at once, or raise the server's max_pending"
#: the remedy when every session of a pool stayed checked out (``environment_factory`` over a pool)
POOL_BUSY_REMEDY = "Make the pool at least as large as the number of instances (the generation batch size)"
#: the remedy when a server stayed full while ``environment_factory`` read its tools
TOOLS_REMEDY = f"Wait for its other clients, or {RAISE_SESSION_LIMIT}"


def instances_remedy(max_servers: int | None) -> str:
    """The remedy when an ``environment_factory`` instance found no room.

    Args:
        max_servers: the class's cap on servers it starts, when it starts them
            (``None``: it was given a server URL, or its servers cannot grow).
    """
    more = f"raise max_servers (now {max_servers}), " if max_servers is not None else ""
    return (
        f"Run fewer instances at once, {more}or {RAISE_SESSION_LIMIT}: the servers must hold the generation batch size"
    )


def backoff(first: float = 0.02, flat: int = 100, factor: float = 1.5, ceiling: float = 0.25) -> Iterator[float]:
    """Delays for polling: ``first`` for ``flat`` rounds (servers usually come up within
    a couple of seconds, and a coarse poll overshoots), then growing by ``factor`` up to ``ceiling``."""
    for _ in range(flat):
        yield first
    delay = first
    while True:
        delay = min(delay * factor, ceiling)
        yield delay


def capacity_delays() -> Iterator[float]:
    """The backoff between capacity retries (and between a pool's replacement attempts).

    0.05 s three times (a server usually frees a slot within moments), then
    doubling up to 2 s: 0.05, 0.05, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, ...
    """
    return backoff(first=0.05, flat=3, factor=2.0, ceiling=2.0)


def waits_for_capacity(exc: BaseException | None) -> bool:
    """Whether a call failed for want of room now (retried with backoff within the capacity budget).

    ``CAPACITY_REACHED``, and a handshake refused with HTTP ``503`` (the
    server's pending-connection cap: too many handshakes at once).
    """
    return isinstance(exc, CapacityReached) or (isinstance(exc, ConnectError) and exc.status == 503)


def still_full(
    error: OpenEnvError,
    timeout: float | None,
    *,
    option: str = "capacity_timeout",
    remedy: str = SESSIONS_REMEDY,
    doing: str = "",
) -> OpenEnvError:
    """The error to raise when the wait for room ends: ``error``'s own class, saying how long it waited.

    ``<error>; still full after waiting capacity_timeout=3 s with backoff<doing>. <remedy>``
    (``still overloaded`` and `OVERLOADED_REMEDY` for a handshake refused with
    HTTP 503, ``still busy`` for `SessionBusy`). Any other error, and any error
    after a zero budget (nothing was waited), is returned unchanged.

    Args:
        error: the last refusal.
        timeout: the budget that was spent (``capacity_timeout``).
        option: the name the user sets the budget by (``"--capacity-timeout"`` on the command line).
        remedy: what to do about it (a sentence; ``""``: none, the caller says it elsewhere).
        doing: what the wait was for, appended after "with backoff" (``" to read the environment's tools"``).
    """
    if timeout is not None and timeout <= 0:
        return error
    budget = f"{option}=None" if timeout is None else f"{option}={timeout:g} s"
    waited = f"after waiting {budget} with backoff{doing}"
    if isinstance(error, CapacityReached):
        message = _sentence(f"{error.message.rstrip('.')}; still full {waited}", remedy)
        return CapacityReached(message, error.code, error.details)
    if isinstance(error, ConnectError) and error.status == 503:
        overloaded = ConnectError(_sentence(f"{str(error).rstrip('.')}; still overloaded {waited}", OVERLOADED_REMEDY))
        overloaded.status = error.status
        return overloaded
    if isinstance(error, SessionBusy):
        return SessionBusy(_sentence(f"{str(error).rstrip('.')}; still busy {waited}", remedy))
    return error


def _sentence(text: str, remedy: str) -> str:
    return f"{text}. {remedy}" if remedy else text


def waiting_note(error: CapacityReached, timeout: float, *, option: str = "--capacity-timeout") -> str:
    """The one line a command prints when it starts waiting for room."""
    return (
        f"the server is at capacity ({error.message.rstrip('.')}): waiting up to {timeout:g} s "
        f"for a session to come free ({option})"
    )


class CapacityWait:
    """The capacity budget of one call: every session it opens waits within one ``timeout``.

    Each session that waits takes a `CapacityRetry` from it (its own backoff,
    the shared deadline).

    Args:
        timeout: the budget in seconds (``capacity_timeout``; ``None``: no limit).
        now: when the call began (the caller's monotonic clock).
        option: the name the user sets ``timeout`` by, for the messages.
    """

    __slots__ = ("timeout", "end", "option")

    def __init__(self, timeout: float | None, now: float, *, option: str = "capacity_timeout") -> None:
        self.timeout = timeout
        self.option = option
        self.end = None if timeout is None else now + timeout

    def restart(self, now: float) -> None:
        """The whole budget again from ``now`` (a wait of another kind, such as a server's start, came between)."""
        self.end = None if self.timeout is None else now + self.timeout

    def left(self, now: float) -> float | None:
        """Seconds of the budget left at ``now`` (never negative; ``None``: no limit)."""
        return None if self.end is None else max(0.0, self.end - now)

    def retry(self) -> CapacityRetry:
        """The retry schedule of one session within this budget."""
        return CapacityRetry(self)


class CapacityRetry:
    """One session's tries while there is no room: when to try again, when to give up, and what to say."""

    __slots__ = ("wait", "_delays")

    def __init__(self, wait: CapacityWait) -> None:
        self.wait = wait
        self._delays = capacity_delays()

    def delay(self, now: float, *, spread: float | None = None) -> float | None:
        """Seconds to wait before the next try at ``now``, the caller having found no room; ``None``: give up.

        Args:
            spread: a random draw in [0, 1) (the caller's ``random.random()``) that spreads
                the delay over half to one and a half of the schedule's: for callers that let
                go of their places while they wait, so that they do not all come back at once.
        """
        left = self.wait.left(now)
        if left is not None and left <= 0:
            return None
        delay = next(self._delays)
        if spread is not None:
            delay *= 0.5 + spread
        return delay if left is None else min(delay, left)

    def after(self, error: BaseException, now: float) -> float | None:
        """Seconds to wait before the next try after ``error`` at ``now``; ``None``: give up, raise ``final(error)``.

        Only a full (``CAPACITY_REACHED``) or overloaded (HTTP 503 on the
        handshake) server is waited for (`waits_for_capacity`), and only until
        the budget is spent.
        """
        return self.delay(now) if waits_for_capacity(error) else None

    def final(self, error: OpenEnvError, *, remedy: str = SESSIONS_REMEDY, doing: str = "") -> OpenEnvError:
        """The error to raise on giving up: `still_full` for what was waited for, else ``error`` itself."""
        wait = self.wait
        return still_full(error, wait.timeout, option=wait.option, remedy=remedy, doing=doing)
