"""The decisions of ``EnvPool``, sans-IO: which session is sent what, in which order, and what a failure means.

``EnvPool`` (``_async/pool.py`` and its generated twin) only moves frames; this
module holds the per-session bookkeeping (episode over, failed, request queued
or in flight, checked out), turns ``reset``/``step`` arguments into one job per
session (autoreset included), applies the client-side concurrency limit,
keeps the requests in flight with their send times (``sent``, ``overdue``,
``next_due``: the clock is the caller's, as in h11 and websockets), decides the
replacements (`ReplacePlan`) and when a server cannot hold the pool
(`overcommit_error`; the capacity waits are `openenv._core.capacity`'s) with
their messages, and builds the public result types [`Completed`][openenv.sync.Completed] and
[`PoolMetrics`][openenv.sync.PoolMetrics].  It does no IO, reads no clock and takes
no lock: the IO layer that shares a pool between threads (``checkout()``) holds one.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Generic, Literal, TypeVar

from .capacity import capacity_delays
from .errors import CapacityReached, EnvClosed, OpenEnvError, PoolError, SessionBusy, SessionLost
from .options import EnvOptions, check_timeout
from .result import StepResult
from .servers import RAISE_SESSION_LIMIT, limit_from, overcommitted, overcommitted_message

__all__ = [
    "Completed",
    "PoolMetrics",
    "PoolOptions",
    "PoolArgs",
    "PoolCall",
    "PoolLife",
    "JobKind",
    "Job",
    "PoolCore",
    "ON_FAILURE",
    "ReplacePlan",
    "overcommit_error",
]

ObsT = TypeVar("ObsT")

#: the values ``on_failure`` takes
ON_FAILURE = ("raise", "replace")

#: Handshakes one pool has under way at once when it opens sessions: the others wait their turn, and
#: each one's ``connect_timeout`` runs from its own start.  512 handshakes started together on a loaded
#: two-core machine ran out of time together (every one, at the client's 10 s), or were closed by the
#: server's own handshake timeout; the default server also answers 503 beyond its 64 pending ones.
OPENING_AT_ONCE = 64


@dataclass(frozen=True)
class PoolOptions:
    """How an [`EnvPool`][openenv.sync.EnvPool] runs its sessions: the pool's own options, checked once.

    Every constructor of ``EnvPool`` (``EnvPool(...)``, ``from_provider``,
    ``from_docker_image``, ``from_env``) takes these as keyword arguments
    (``EnvPool(url, size=8, autoreset=True)``) or as one object
    (``EnvPool(url, size=8, pool_options=PoolOptions(autoreset=True))``); not both.

    Attributes:
        autoreset: Gymnasium's next-step autoreset: once a step returned
            ``done``, that session's next ``step`` sends a ``reset`` (with no
            arguments) instead, and its slot in the results is the reset's.
        on_failure: ``"raise"`` (default): a failed session is reported in a
            [`PoolError`][openenv.sync.PoolError] and stays failed until
            ``reset(ids=[i])`` or ``replace(i)``; ``"replace"``: it is replaced at once
            (after a failed ``reset``, the new session's reset has that reset's seed and keywords),
            except a ``reset`` that a full server still refused when ``capacity_timeout`` ran out:
            that one is reported, unless the pool started a server for that session alone.
            Several failed sessions are replaced together (those of a shared server
            that died: one after another).
        replace_attempts: tries to replace a failed session (create and reset), with backoff.
        max_concurrency: at most this many requests in flight (``None``: no limit);
            the others are queued and sent as replies come in.
        capacity_timeout: seconds to keep retrying while a server answers
            ``CAPACITY_REACHED`` (``None`` or ``inf``: no limit).

    Raises:
        ValueError: ``on_failure``, ``replace_attempts`` or ``max_concurrency`` is out of range.
        InvalidOption: ``capacity_timeout`` is not a positive number of seconds or ``None``.
    """

    autoreset: bool = False
    on_failure: Literal["raise", "replace"] = "raise"
    replace_attempts: int = 3
    max_concurrency: int | None = None
    capacity_timeout: float | None = 60.0

    def __post_init__(self) -> None:
        check_replace_attempts(self.replace_attempts)
        object.__setattr__(self, "capacity_timeout", check_timeout("capacity_timeout", self.capacity_timeout))
        check_max_concurrency(self.max_concurrency)
        check_on_failure(self.on_failure)

    @classmethod
    def split(cls, keywords: Mapping[str, Any], given: PoolOptions | None = None) -> tuple[PoolOptions, dict[str, Any]]:
        """The pool's options among a constructor's keyword arguments (or ``given``), and the rest (``Env``'s).

        Raises:
            TypeError: both ``given`` and some of its keyword arguments were passed.
        """
        mine = {k: v for k, v in keywords.items() if k in POOL_OPTION_NAMES}
        rest = {k: v for k, v in keywords.items() if k not in POOL_OPTION_NAMES}
        if given is None:
            return cls(**mine), rest
        if mine:
            raise TypeError(
                f"pass the pool's options either as pool_options or as keyword arguments, not both: {sorted(mine)}"
            )
        if not isinstance(given, PoolOptions):
            raise TypeError(f"pool_options must be a PoolOptions, not {type(given).__name__}")
        return given, rest


#: the keyword arguments that are ``PoolOptions``' fields
POOL_OPTION_NAMES = frozenset(f.name for f in fields(PoolOptions))


class PoolArgs(EnvOptions, total=False):
    """The keyword arguments of ``EnvPool``'s constructors: the pool's options and ``Env``'s connection options."""

    autoreset: bool
    on_failure: Literal["raise", "replace"]
    replace_attempts: int
    max_concurrency: int | None
    capacity_timeout: float | None


class PoolCall(enum.Enum):
    """Which pool call a failure is reported for (its value names it in messages)."""

    RESET = "reset"
    STEP = "step"
    OPENING = "opening"

    @property
    def waits_for_capacity(self) -> bool:
        """Whether its requests refused for capacity are retried (a fresh session's first reset)."""
        return self is PoolCall.RESET


class PoolLife:
    """Whether an ``EnvPool`` was opened (``connect()``) and whether it is closed."""

    __slots__ = ("opened", "closed")

    def __init__(self) -> None:
        self.opened = False
        self.closed = False

    def check_open(self) -> None:
        """Raises ``EnvClosed`` once the pool is closed."""
        if self.closed:
            raise EnvClosed("this EnvPool is closed; create a new one")


@dataclass(frozen=True)
class Completed(Generic[ObsT]):
    """One session's reply, as returned by [`EnvPool.recv()`][openenv.sync.EnvPool.recv].

    Attributes:
        index: the session's index in the pool.
        result: the step's (or reset's) result; ``None`` when the session
            failed and was not replaced.  When ``replaced``, the result of the
            reset that started the new session's episode.
        error: why the session failed (``None`` when it did not).
        replaced: the session failed and the pool replaced it
            (``on_failure="replace"``): ``result`` is the new episode's first.
    """

    index: int
    result: StepResult[ObsT] | None = None
    error: OpenEnvError | None = None
    replaced: bool = False

    @property
    def ok(self) -> bool:
        """Whether the request succeeded (no error, not replaced)."""
        return self.error is None


@dataclass(frozen=True)
class PoolMetrics:
    """A snapshot of an [`EnvPool`][openenv.sync.EnvPool]'s sessions.

    Attributes:
        size: the number of sessions.
        active: healthy sessions (open, not marked failed).
        in_flight: requests sent whose replies have not been read yet.
        queued: requests waiting for a free ``max_concurrency`` slot.
        failures: sessions that failed so far (in total).
        replacements: sessions replaced so far (in total).
        checked_out: sessions taken out with ``checkout()``.
    """

    size: int
    active: int
    in_flight: int
    queued: int
    failures: int
    replacements: int
    checked_out: int


class JobKind(enum.Enum):
    """What a session is sent."""

    RESET = "reset"
    STEP = "step"
    #: the session was marked failed: nothing is sent (it is reported, or replaced)
    FAILED = "failed"


@dataclass
class Job:
    """One request for one session."""

    index: int
    kind: JobKind
    #: the action of a step
    action: Any = None
    #: the keyword arguments of a reset
    kwargs: dict[str, Any] | None = None
    #: a reset sent instead of a step because the last step ended the episode
    autoreset: bool = False


class _Slot:
    __slots__ = ("done", "failed", "state", "checked_out")

    def __init__(self) -> None:
        #: the last result ended the episode (autoreset resets it on its next step)
        self.done = False
        #: the error that failed the session, until a successful reset or a replacement
        self.failed: OpenEnvError | None = None
        #: None, "queued" or "sent"
        self.state: str | None = None
        self.checked_out = False


class PoolCore:
    """The bookkeeping of a pool of ``size`` sessions (no IO).

    Args:
        size: the number of sessions.
        autoreset: Gymnasium's next-step autoreset (see ``plan_step``).
        max_concurrency: at most this many requests in flight (``None``: no limit).
        on_failure: ``"raise"`` or ``"replace"``.
        message_timeout: seconds each reply is due within, from its send (``None``: no limit).

    Raises:
        ValueError: an argument is out of range.
    """

    def __init__(
        self,
        size: int,
        *,
        autoreset: bool,
        max_concurrency: int | None,
        on_failure: str,
        message_timeout: float | None = None,
    ) -> None:
        check_size(size)
        check_max_concurrency(max_concurrency)
        check_on_failure(on_failure)
        self.autoreset = autoreset
        self.max_concurrency = max_concurrency
        self.on_failure = on_failure
        self.slots = [_Slot() for _ in range(size)]
        self.queue: deque[Job] = deque()
        self.in_flight = 0
        self.failures = 0
        self.replacements = 0
        self.message_timeout = message_timeout
        #: the requests in flight, by session index, with their send times (in order of sending)
        self._sent: dict[int, tuple[Job, float]] = {}

    @property
    def size(self) -> int:
        return len(self.slots)

    # -- arguments ------------------------------------------------------------

    def ids(self, ids: Sequence[int] | None) -> list[int]:
        """The sessions a call is about: ``ids`` checked, or every session.

        Raises:
            IndexError: an index is out of range.
            ValueError: an index appears twice.
        """
        if ids is None:
            return list(range(self.size))
        order = [self.index(i) for i in ids]
        if len(set(order)) != len(order):
            raise ValueError(f"ids has duplicates: {list(ids)}")
        return order

    def index(self, index: int) -> int:
        """``index`` checked against the pool's size.

        Raises:
            IndexError: ``index`` is out of range.
        """
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.size:
            raise IndexError(f"session index {index!r} is out of range for a pool of {self.size}")
        return index

    def check_free(self, order: Sequence[int]) -> None:
        """Raises ``SessionBusy`` when one of the sessions has a request outstanding or is checked out."""
        for i in order:
            slot = self.slots[i]
            if slot.state is not None:
                raise SessionBusy(f"session {i} has a request outstanding (send); read its reply with recv() first")
            if slot.checked_out:
                raise SessionBusy(f"session {i} is checked out (checkout()); give it back first")

    def check_idle(self) -> None:
        """Raises ``SessionBusy`` while ``send`` requests are outstanding (``step``/``reset`` wait for none)."""
        if self.in_flight or self.queue:
            raise SessionBusy(
                f"{self.in_flight + len(self.queue)} send() request(s) are outstanding; "
                "read their replies with recv() before calling step() or reset()"
            )

    # -- planning ---------------------------------------------------------------

    def plan_reset(
        self,
        order: Sequence[int],
        seed: int | Sequence[int | None] | None,
        kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None,
    ) -> list[Job]:
        """One reset per session of ``order``.

        ``seed``: ``None`` (none sent), one seed per session, or an int ``s``
        (session ``order[k]`` gets ``s + k``, as in Gymnasium).  ``kwargs``: one
        dict for all, or one (or ``None``) per session.

        Raises:
            ValueError: a list's length differs from the number of sessions.
            TypeError: ``seed`` or ``kwargs`` has the wrong type.
        """
        n = len(order)
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, int) and not isinstance(seed, bool):
            seeds = [seed + k for k in range(n)]
        elif isinstance(seed, Sequence) and not isinstance(seed, str):
            seeds = list(seed)
            _check_len("seed", seeds, n)
        else:
            raise TypeError(f"seed must be None, an int or a list of ints, not {type(seed).__name__}")
        if kwargs is None or isinstance(kwargs, Mapping):
            each: list[Mapping[str, Any] | None] = [kwargs] * n
        elif isinstance(kwargs, Sequence) and not isinstance(kwargs, str):
            each = list(kwargs)
            _check_len("kwargs", each, n)
        else:
            raise TypeError(f"kwargs must be a dict or a list of dicts, not {type(kwargs).__name__}")
        jobs = []
        for i, s, kw in zip(order, seeds, each, strict=True):
            args = dict(kw or {})
            if s is not None:
                args["seed"] = s
            jobs.append(Job(i, JobKind.RESET, kwargs=args))
        return jobs

    def plan_step(self, order: Sequence[int], actions: Sequence[Any]) -> list[Job]:
        """One step per session of ``order``.

        With ``autoreset``, a session whose last result was ``done`` is reset
        instead (no arguments; its action is ignored).  A session marked
        failed gets a ``FAILED`` job (nothing is sent).

        Raises:
            TypeError: ``actions`` is one action (a dict or a model), or not a sequence.
            ValueError: ``len(actions)`` differs from the number of sessions.
        """
        if (
            isinstance(actions, (Mapping, str, bytes))
            or hasattr(actions, "model_dump")
            or not isinstance(actions, Iterable)
        ):
            shown = "a dict" if isinstance(actions, Mapping) else type(actions).__name__
            raise TypeError(
                f"actions must be a list with one action per session ({len(order)}), not {shown}: "
                f"pool.step([action] * {len(order)}) sends the same action to every session"
            )
        actions = list(actions)
        _check_len("actions", actions, len(order))
        jobs = []
        for i, action in zip(order, actions, strict=True):
            slot = self.slots[i]
            if slot.failed is not None:
                jobs.append(Job(i, JobKind.FAILED, action=action))
            elif self.autoreset and slot.done:
                jobs.append(Job(i, JobKind.RESET, kwargs={}, autoreset=True))
            else:
                jobs.append(Job(i, JobKind.STEP, action=action))
        return jobs

    def failed_error(self, index: int) -> OpenEnvError:
        """The error reported for a step on a session marked failed."""
        cause = self.slots[index].failed
        return SessionLost(
            f"session {index} failed earlier ({type(cause).__name__}: {cause}); nothing was sent. "
            f"Call reset(ids=[{index}]) or replace({index}) first"
        )

    # -- the queue (max_concurrency) ---------------------------------------------

    def claim(self, order: Sequence[int], jobs: Sequence[Job]) -> None:
        """``check_free(order)``, then ``enqueue(jobs)``, as one step (the caller holds its lock for both).

        Raises:
            SessionBusy: a session of ``order`` has a request outstanding or is checked out.
        """
        self.check_free(order)
        self.enqueue(jobs)

    def enqueue(self, jobs: Sequence[Job]) -> None:
        """Queue requests (their sessions are marked busy at once)."""
        for job in jobs:
            self.slots[job.index].state = "queued"
            self.queue.append(job)

    def sendable(self) -> list[Job]:
        """The queued jobs that may be sent now (oldest first), marked in flight."""
        free = len(self.queue) if self.max_concurrency is None else self.max_concurrency - self.in_flight
        out = []
        while self.queue and free > 0:
            job = self.queue.popleft()
            self.slots[job.index].state = "sent"
            self.in_flight += 1
            free -= 1
            out.append(job)
        return out

    def unqueue(self) -> list[Job]:
        """Drop every queued job (an interrupted call); returns them."""
        jobs = list(self.queue)
        self.queue.clear()
        for job in jobs:
            self.slots[job.index].state = None
        return jobs

    # -- in flight: send times and due dates (``now`` is the caller's monotonic clock) ----------

    def sent(self, job: Job, now: float) -> None:
        """``job`` (from ``sendable()``) went out at ``now``: its reply is due ``message_timeout`` later."""
        self._sent[job.index] = (job, now)

    def flying(self) -> list[int]:
        """The sessions whose request went out and whose reply was not settled yet, in order of sending."""
        return list(self._sent)

    def job(self, index: int) -> Job:
        """The job in flight on session ``index``."""
        return self._sent[index][0]

    def overdue(self, now: float) -> list[int]:
        """The sessions in flight whose reply is overdue at ``now`` (in order of sending)."""
        if self.message_timeout is None:
            return []
        return [i for i, (_, at) in self._sent.items() if at + self.message_timeout <= now]

    def next_due(self, now: float) -> float | None:
        """Seconds from ``now`` until the first reply in flight is due (``0`` when one is overdue).

        ``None`` without ``message_timeout``, or with nothing in flight.
        """
        if self.message_timeout is None or not self._sent:
            return None
        return max(0.0, min(at for _, at in self._sent.values()) + self.message_timeout - now)

    def wait_for(self, now: float, wait: float | None) -> float | None:
        """How long to wait for a reply at most: ``wait``, or less when a reply falls due first."""
        due = self.next_due(now)
        if due is None:
            return wait
        return due if wait is None else min(wait, due)

    def read_timeout(self, index: int, now: float) -> float | None:
        """The timeout of reading session ``index``'s reply: what is left of ``message_timeout`` since its send.

        At least a millisecond, so a reply already buffered is read even when it is overdue.
        """
        if self.message_timeout is None:
            return None
        return max(self.message_timeout - (now - self._sent[index][1]), 0.001)

    # -- outcomes -----------------------------------------------------------------

    def settled(self, job: Job, result: StepResult[Any] | None, error: OpenEnvError | None) -> None:
        """A sent job ended (a reply, or an error)."""
        self._sent.pop(job.index, None)
        slot = self.slots[job.index]
        if slot.state == "sent":
            self.in_flight -= 1
        slot.state = None
        if error is not None:
            self.fail(job.index, error)
        elif result is not None:
            slot.done = bool(result.done)
            if job.kind is JobKind.RESET:
                slot.failed = None

    def fail(self, index: int, error: OpenEnvError) -> None:
        """Mark a session failed (counted once per failure)."""
        slot = self.slots[index]
        slot.failed = error
        slot.done = False
        self.failures += 1

    def recovered(self, index: int, result: StepResult[Any]) -> None:
        """A reset refused for capacity succeeded on retry: not a failure after all."""
        slot = self.slots[index]
        slot.failed = None
        slot.done = bool(result.done)
        self.failures -= 1

    def replaced(self, index: int, result: StepResult[Any]) -> None:
        """Session ``index`` was replaced and reset."""
        slot = self.slots[index]
        slot.failed = None
        slot.done = bool(result.done)
        self.replacements += 1

    # -- checkout and size -----------------------------------------------------------

    def checkout(self) -> int:
        """Take a free healthy session (lowest index first).

        Raises:
            SessionBusy: every session is busy, checked out or failed.
        """
        for i, slot in enumerate(self.slots):
            if slot.state is None and not slot.checked_out and slot.failed is None:
                slot.checked_out = True
                return i
        raise SessionBusy(
            f"no free session in the pool of {self.size}: each is checked out, busy or failed; "
            "give one back, or resize() the pool"
        )

    def checkin(self, index: int) -> None:
        """Session ``index`` came back from ``checkout()`` (its episode state is unknown: no autoreset)."""
        slot = self.slots[index]
        slot.checked_out = False
        slot.done = False

    def resize(self, size: int) -> None:
        """Grow (new idle sessions) or shrink (drop the last ones) the bookkeeping.

        Raises:
            SessionBusy: a session that would go is busy or checked out.
        """
        check_size(size)
        self.check_free(range(size, self.size))
        del self.slots[size:]
        self.slots.extend(_Slot() for _ in range(size - len(self.slots)))

    def metrics(self, healthy: Sequence[bool]) -> PoolMetrics:
        """The snapshot; ``healthy[i]``: whether session ``i``'s client is open."""
        active = sum(1 for ok, slot in zip(healthy, self.slots, strict=True) if ok and slot.failed is None)
        return PoolMetrics(
            size=self.size,
            active=active,
            in_flight=self.in_flight,
            queued=len(self.queue),
            failures=self.failures,
            replacements=self.replacements,
            checked_out=sum(1 for slot in self.slots if slot.checked_out),
        )


def check_size(size: int) -> None:
    """Raises ``ValueError`` unless ``size`` is a positive integer."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, not {size!r}")


def session_urls(base_url: str | Sequence[str], size: int | None) -> list[str]:
    """Each session's server: ``size`` sessions on one ``base_url`` (default 1), or one per URL of a list.

    Raises:
        ValueError: ``size`` is not a positive integer, the list is empty, or ``size`` differs from its length.
    """
    if isinstance(base_url, str):
        if size is not None:
            check_size(size)
        return [base_url] * (1 if size is None else size)
    urls = list(base_url)
    if not urls:
        raise ValueError("base_url is an empty list; give at least one server")
    if size is not None and size != len(urls):
        raise ValueError(f"size={size} but {len(urls)} URLs were given (one session per URL)")
    return urls


def check_replace_attempts(attempts: int) -> None:
    """Raises ``ValueError`` unless ``replace_attempts`` is a positive integer."""
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"replace_attempts must be a positive integer, not {attempts!r}")


def check_max_concurrency(max_concurrency: int | None) -> None:
    """Raises ``ValueError`` unless ``max_concurrency`` is a positive integer or ``None``."""
    if max_concurrency is not None and (isinstance(max_concurrency, bool) or max_concurrency < 1):
        raise ValueError(f"max_concurrency must be a positive integer or None, not {max_concurrency!r}")


def check_on_failure(on_failure: str) -> None:
    """Raises ``ValueError`` unless ``on_failure`` is one of ``ON_FAILURE``."""
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {ON_FAILURE}, not {on_failure!r}")


def _check_len(name: str, values: Sequence[Any], n: int) -> None:
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries for {n} session(s); give one per session")


def pool_error(
    what: PoolCall, order: Sequence[int], results: Mapping[int, Any], errors: Mapping[int, OpenEnvError]
) -> str:
    """The message of a ``PoolError``: which sessions failed, and the first error."""
    failed = sorted(errors)
    first = errors[failed[0]]
    return (
        f"{what.value} failed for {len(failed)} of {len(order)} session(s) (indices {failed}); "
        f"session {failed[0]}: {type(first).__name__}: {first}. The other results are in .results; "
        "each failed session stays failed until reset(ids=[i]) or replace(i) (or use on_failure='replace')"
    )


def first_failure(failures: Mapping[int, PoolError]) -> str:
    """``session i: <why>`` for the lowest index of ``failures``."""
    index = min(failures)
    return f"session {index}: {failures[index]}"


# -- capacity: a server that cannot hold the pool (the waits themselves: ``capacity.py``) ------------------


def overcommit_error(
    error: CapacityReached, *, ours: int, sessions: int, servers: int | None, max_servers: int | None
) -> CapacityReached | None:
    """The error to raise at once when the pool puts more sessions on a server than it holds (waiting cannot help).

    Args:
        error: the server's ``CAPACITY_REACHED`` (its details may say how many sessions it holds).
        ours: the pool's sessions on that server.
        sessions: the pool's sessions in all.
        servers: the servers the pool started (``None``: the pool was given URLs).
        max_servers: the pool's cap on servers.

    Returns:
        ``None`` when the server's limit is unknown or not exceeded (then wait).
    """
    limit = limit_from(error.details)
    if limit is None or not overcommitted(ours, limit):
        return None
    if servers is not None:
        message = overcommitted_message(sessions, servers, limit, max_servers)
    else:
        message = (
            f"the server holds {limit} session(s) and this pool opens {ours} on it: give one URL per "
            f"{limit} session(s), let EnvPool.from_env/from_docker_image start one server per session, "
            f"or {RAISE_SESSION_LIMIT}"
        )
    return CapacityReached(f"{error.message}; {message}", error.code, error.details)


# -- replacing a failed session ------------------------------------------------------------------------


class ReplacePlan:
    """How session ``index`` is replaced: ``attempts`` tries with backoff between them, and what a failure says.

    Each try makes a new client, and a new server when the pool started one
    for this session alone (``own_server``); the pool then resets it.

    Args:
        index: the session.
        attempts: ``replace_attempts``.
        own_server: the pool started this session's server and no other session shares it.
        moving: the session's server was shared and died: the session moves to
            a live server or a new one (placed as ``resize`` places one), one
            such session after another.
    """

    __slots__ = ("index", "attempts", "own_server", "moving", "last", "_delays", "_tries")

    def __init__(self, index: int, attempts: int, *, own_server: bool, moving: bool = False) -> None:
        self.index = index
        self.attempts = attempts
        self.own_server = own_server
        self.moving = moving
        #: the last attempt's error
        self.last: OpenEnvError | None = None
        self._delays = capacity_delays()
        self._tries = 0

    def next_try(self) -> float | None:
        """Seconds to wait before the next try (``0.0`` for the first), or ``None``: every attempt was made."""
        if self._tries >= self.attempts:
            return None
        self._tries += 1
        return 0.0 if self._tries == 1 else next(self._delays)

    def failed(self, error: OpenEnvError) -> None:
        """The current try failed with ``error``."""
        self.last = error

    def error(self) -> PoolError:
        """The ``PoolError`` once every attempt failed (``errors[index]``: the last attempt's error)."""
        last = self.last
        assert last is not None
        index = self.index
        return PoolError(
            f"could not replace session {index} in {self.attempts} attempt(s): {type(last).__name__}: {last}",
            {index: None},
            {index: last},
        )


def unreplaced_message(what: PoolCall, failed: int, total: int, unreplaced: Mapping[int, PoolError]) -> str:
    """The message of ``step``/``reset``'s ``PoolError`` when failed sessions could not be replaced."""
    return (
        f"{what.value} failed for {failed} of {total} session(s) and "
        f"{len(unreplaced)} could not be replaced (indices {sorted(unreplaced)}); "
        f"{first_failure(unreplaced)}. The other results are in .results; retry with replace(i)"
    )


def still_full_message(
    what: PoolCall,
    failed: int,
    total: int,
    still_full: Mapping[int, OpenEnvError],
    unreplaced: Mapping[int, PoolError],
) -> str:
    """The message of ``reset``'s ``PoolError`` (``on_failure="replace"``) when full servers still refused sessions.

    Those sessions are not replaced: a new session on the same full server
    would only wait again.  Sessions that could not be replaced are named too.
    """
    index = min(still_full)
    message = (
        f"{what.value} failed for {failed} of {total} session(s); {len(still_full)} still refused by a full "
        f"server when capacity_timeout ran out (indices {sorted(still_full)}) and not replaced, since a new session "
        f"on that server would only wait again; session {index}: {type(still_full[index]).__name__}: "
        f"{still_full[index]}"
    )
    if unreplaced:
        message += (
            f"; {len(unreplaced)} could not be replaced (indices {sorted(unreplaced)}); {first_failure(unreplaced)}"
        )
    return message + ". The other results are in .results; reset(ids=[i]) once the server has room"


def recv_unreplaced_message(unreplaced: Mapping[int, PoolError]) -> str:
    """The message of ``recv``'s ``PoolError`` when failed sessions could not be replaced."""
    return (
        f"{len(unreplaced)} failed session(s) could not be replaced (indices {sorted(unreplaced)}); "
        f"{first_failure(unreplaced)}. The other completions are returned by the next recv()"
    )


__all__ += [
    "check_size",
    "session_urls",
    "check_replace_attempts",
    "pool_error",
    "first_failure",
    "unreplaced_message",
    "still_full_message",
    "recv_unreplaced_message",
]
