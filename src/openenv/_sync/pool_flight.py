# GENERATED from src/openenv/_async/pool_flight.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The flight room of ``EnvPool``: requests sent through the connection seam, and their replies read.

The core (``_core/pool.py``) says what may go out now (``sendable``), holds each
request's job and send time, and says which replies are overdue and how long a
read may wait; this room keeps only the map of tickets (session index -> the
request in flight) and moves the frames through each session's ``Seam``
(``connection.py``): ``_send`` / ``_receive`` / ``_abandon``.  One object of
``EnvPool`` (no public API): it owns the tickets, the requests ``send`` encoded
and the completions ``recv`` has not returned yet, and is handed the pool's
sessions (``PoolSessions``) and core.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .._blocking.retry import Deadline
from .._core.errors import EnvClosed, OpenEnvError
from .._core.pool import OPENING_AT_ONCE, Completed, Job, JobKind, PoolCore
from .._core.result import StepResult
from .._core.session import Request
from .._shim_sync import run_all, ws_wait_any
from .connection import Seam, Ticket
from .pool_servers import quietly
from .pool_sessions import PoolSessions


class PoolFlight:
    """Sending and reading for ``EnvPool``: the requests in flight, and what ``send``/``recv`` hold between calls."""

    def __init__(self, sessions: PoolSessions[Any, Any, Any], core: PoolCore) -> None:
        #: the sessions: the pool drives each through its ``Seam`` (``Env`` has it)
        self.sessions = sessions
        self.core = core
        #: the requests in flight, by session index (their jobs and send times are the core's)
        self.tickets: dict[int, Ticket] = {}
        #: the requests encoded by ``send`` and not sent yet
        self.calls: dict[int, Request[Any]] = {}
        #: the completions of ``send`` requests not returned by ``recv`` yet
        self.ready: list[Completed[Any]] = []

    def collect(self, min_results: int, deadline: Deadline) -> list[Completed[Any]]:
        """``recv``'s reading: completions until ``min_results`` are in, nothing is outstanding, or ``deadline``.

        Queued requests are sent as replies free their slots.  Interrupted, what
        was read is kept for the next ``recv`` and the requests in flight are abandoned.
        """
        done, self.ready = list(self.ready), []
        try:
            while len(done) < min_results and self.tickets:
                ready = self.wait_ready(deadline.remaining())
                for index in ready:
                    errors: dict[int, OpenEnvError] = {}
                    results: dict[int, StepResult[Any]] = {}
                    self.receive_one(index, results, errors)
                    self.calls.pop(index, None)
                    done.append(Completed(index, results.get(index), errors.get(index)))
                    done.extend(self.pump(self.calls, {}))
                if not ready and deadline.expired:
                    break
        except BaseException:
            self.ready = done + self.ready
            self.abandon_all()
            raise
        return done

    def fly(
        self, calls: dict[int, Request[Any]], results: dict[int, StepResult[Any]], errors: dict[int, OpenEnvError]
    ) -> None:
        """Send ``calls`` within the concurrency limit and read every reply (``step``/``reset``).

        Interrupted (Ctrl-C, cancellation), every request in flight is abandoned.
        """
        try:
            self.pump(calls, errors)
            while self.tickets:
                if not self.core.queue:
                    # nothing waits for a slot: plain blocking reads, in order (no polling)
                    self.receive_one(next(iter(self.tickets)), results, errors)
                    continue
                # requests wait for a slot: read whichever reply comes first, so a slot frees at once
                for index in self.wait_ready(None):
                    self.receive_one(index, results, errors)
                    self.pump(calls, errors)
        except BaseException:
            self.abandon_all()
            raise

    def encode(self, jobs: Sequence[Job]) -> dict[int, Request[Any]]:
        """Each job's request, built by its session as ``Env.step``/``reset`` build theirs (nothing is sent)."""
        calls: dict[int, Request[Any]] = {}
        for job in jobs:
            env: Seam = self.sessions.envs[job.index]
            if job.kind is JobKind.RESET:
                calls[job.index] = env._reset_request(job.kwargs or {})
            elif job.kind is JobKind.STEP:
                calls[job.index] = env._step_request(job.action)
        return calls

    def pump(self, calls: dict[int, Request[Any]], errors: dict[int, OpenEnvError]) -> list[Completed[Any]]:
        """Send what the concurrency limit allows, until it allows nothing more.

        A send that fails settles at once (its slot frees for the next queued
        request), so this never returns with requests queued and a slot free.
        """
        failed: list[Completed[Any]] = []
        while True:
            jobs = self.core.sendable()
            if not jobs:
                return failed
            jobs = self.open_cold(jobs, calls, errors, failed)
            for k, job in enumerate(jobs):
                request = calls.pop(job.index)
                try:
                    ticket = self.sessions.envs[job.index]._send(request)
                except OpenEnvError as exc:
                    self.core.settled(job, None, exc)
                    errors[job.index] = exc
                    failed.append(Completed(job.index, None, exc))
                    continue
                except BaseException:
                    for rest in jobs[k:]:  # this one and those not sent yet: nothing is in flight for them
                        self.core.settled(rest, None, None)
                    raise
                self.tickets[job.index] = ticket
                self.core.sent(job, time.monotonic())

    def open_cold(
        self,
        jobs: list[Job],
        calls: dict[int, Request[Any]],
        errors: dict[int, OpenEnvError],
        failed: list[Completed[Any]],
    ) -> list[Job]:
        """Open the not yet connected sessions of ``jobs`` concurrently; return the jobs left to send.

        A pool's first ``reset`` without ``connect()`` (or after sessions were
        lost) would otherwise open them one after another in ``send``: N
        handshakes in a row, N × ``connect_timeout`` against a silent server.
        A session that cannot be opened settles with its error, as a failed send does.
        """
        # a session lost mid-episode is not reopened for a step: send() says SessionLost for it, as Env does
        cold = [job for job in jobs if self.sessions.envs[job.index]._opens(calls[job.index])]
        if len(cold) < 2:
            return jobs
        envs = [self.sessions.envs[job.index] for job in cold]

        def interrupted() -> None:  # as connect() does: the waits end, fresh clients take the places
            for job in cold:
                self.sessions.envs[job.index] = self.sessions.new_env(self.sessions.urls[job.index])
            for env in envs:
                quietly(env.close)

        try:
            outcomes = run_all([env.connect for env in envs], interrupted, OPENING_AT_ONCE)
        except BaseException:
            for job in jobs:  # interrupted: nothing is in flight for any of them (the old clients are closed)
                calls.pop(job.index, None)
                self.core.settled(job, None, None)
            raise
        refused = {job.index: out for job, out in zip(cold, outcomes, strict=True) if isinstance(out, BaseException)}
        unexpected = [exc for exc in refused.values() if not isinstance(exc, OpenEnvError)]
        if unexpected:
            for job in jobs:  # nothing is in flight for any of them
                calls.pop(job.index, None)
                self.core.settled(job, None, None)
            raise unexpected[0]
        for job in cold:
            exc = refused.get(job.index)
            if isinstance(exc, OpenEnvError):
                calls.pop(job.index, None)
                self.core.settled(job, None, exc)
                errors[job.index] = exc
                failed.append(Completed(job.index, None, exc))
        return [job for job in jobs if job.index not in refused]

    def wait_ready(self, wait: float | None) -> list[int]:
        """The sessions in flight whose reply can be read now (or is overdue), waiting up to ``wait`` seconds.

        Polls the sockets' buffers (``ws_wait_any``); a reply not in within
        ``message_timeout`` of its send counts as ready (its read then fails with ``MessageTimeout``).
        """
        now = time.monotonic()
        overdue = self.core.overdue(now)
        if overdue:
            return overdue
        indices = self.core.flying()
        ready = ws_wait_any([self.tickets[i].ws for i in indices], self.core.wait_for(now, wait))
        return [indices[k] for k in sorted(ready)]

    def receive_one(
        self, index: int, results: dict[int, StepResult[Any]], errors: dict[int, OpenEnvError]
    ) -> None:
        """Read session ``index``'s reply and settle it, within what is left of ``message_timeout`` since its send."""
        job, ticket = self.core.job(index), self.tickets.pop(index)
        try:
            timeout = self.core.read_timeout(index, time.monotonic())
            result = self.sessions.envs[index]._receive(ticket, ticket.parse, timeout=timeout)
        except OpenEnvError as exc:
            errors[index] = exc
            self.core.settled(job, None, exc)
            return
        except BaseException:
            self.core.settled(job, None, None)
            raise
        results[index] = result
        self.core.settled(job, result, None)

    def abandon_all(self) -> None:
        """Interrupted between sending and reading (or closing): every session with a reply pending is lost."""
        for index in list(self.tickets):
            # close() from another thread may race the call that is reading these replies: take each once
            ticket = self.tickets.pop(index, None)
            if ticket is None:
                continue
            self.sessions.envs[index]._abandon(ticket)
            try:
                job = self.core.job(index)
            except KeyError:  # settled meanwhile by that call
                continue
            self.core.settled(job, None, EnvClosed("interrupted while its reply was pending"))
        for job in self.core.unqueue():
            self.calls.pop(job.index, None)

    def forget(self, indices: Sequence[int]) -> None:
        """Drop what the pool still held for sessions reset, replaced or removed: unread completions, unsent calls."""
        drop = set(indices)
        self.ready = [c for c in self.ready if c.index not in drop]
        for index in drop:
            self.calls.pop(index, None)
