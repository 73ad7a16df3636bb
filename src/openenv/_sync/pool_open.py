# GENERATED from src/openenv/_async/pool_open.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The opening room of ``EnvPool``: sessions opened while servers are full, and failed sessions replaced.

The core decides (``_core/capacity.py``'s ``CapacityWait`` / ``CapacityRetry``: each
delay, when to give up and what the error says; ``overcommit_error``; ``ReplacePlan``: the attempts,
their backoff and the "could not be replaced" error); this room opens clients,
starts servers, sleeps and reports.  One object of ``EnvPool`` (no public API), handed
the pool's sessions (``PoolSessions``), core, flight room, options and life.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._core.capacity import LET_GO_AFTER, CapacityWait, waits_for_capacity
from .._core.errors import (
    CapacityReached,
    ConnectError,
    EnvClosed,
    EnvTimeout,
    OpenEnvError,
    PoolError,
    SessionLost,
)
from .._core.pool import (
    OPENING_AT_ONCE,
    Completed,
    Job,
    JobKind,
    PoolCall,
    PoolCore,
    PoolLife,
    PoolOptions,
    ReplacePlan,
    overcommit_error,
    pool_error,
    recv_unreplaced_message,
    still_full_message,
    unreplaced_message,
)
from .._core.result import StepResult
from .._core.servers import dead_server_message
from .._shim_sync import run_all, sleep
from .bootstrap import start_providers
from .env import Env
from .liveness import death_of
from .pool_flight import PoolFlight
from .pool_servers import close_all, grow_servers, make_providers, noop, quietly, stop_all, unique
from .pool_sessions import PoolSessions
from .providers import Provider


class PoolOpening:
    """Opening and replacing sessions for ``EnvPool``: handed the pool's sessions, core, flight, options and life."""

    def __init__(
        self,
        sessions: PoolSessions[Any, Any, Any],
        core: PoolCore,
        flight: PoolFlight,
        options: PoolOptions,
        lock: threading.Lock,
        life: PoolLife,
    ) -> None:
        self.sessions = sessions
        self.core = core
        #: what the flight room holds for a session (unread completions, unsent calls) goes when it is replaced
        self.flight = flight
        self.options = options
        #: the lock of the sessions' books (``checkout()`` may run on any thread)
        self.lock = lock
        self.life = life

    def open_envs(
        self, envs: Sequence[Env[Any, Any, Any]], indices: Sequence[int], *, renew: bool = False
    ) -> None:
        """Connect ``envs`` (sessions ``indices``) concurrently, waiting while their servers are full.

        No hold and wait: once a full server (``CAPACITY_REACHED``) has refused
        past the quick retries (`LET_GO_AFTER`), the sessions this call opened
        there are let go while it waits, and all of them try again together after
        the core's delay, spread at random: pools sharing a server never each
        hold a part of it while waiting for the rest.  A session that was
        connected before this call is left as it is.  On failure (or interrupted:
        Ctrl-C on the blocking twin, cancellation here) what this call opened is
        closed; with ``renew`` those sessions get fresh clients, so that
        ``connect()`` can be called again.
        """
        envs = list(envs)  # not the pool's list: ``renew`` changes that one
        retry = CapacityWait(self.options.capacity_timeout, time.monotonic()).retry()
        stop = _Stop()
        kept = {k for k, env in enumerate(envs) if env.connected}  # an open session, with its episode: left alone
        mine = [k for k in range(len(envs)) if k not in kept]
        to_close = list(mine)  # what let_go() has yet to close: a second interrupt during it resumes, not restarts
        renewed = False

        def let_go() -> None:
            nonlocal renewed
            stop.set = True  # the waits between tries end; closing ends a handshake or read under way
            if renew and not renewed:
                renewed = True
                for k in mine:
                    self.sessions.envs[indices[k]] = self.sessions.new_env(self.sessions.urls[indices[k]])
            while to_close:
                quietly(envs[to_close.pop()].close)

        pairs = [*zip(self.sessions.envs, self.sessions.urls, strict=True), *self.sessions.growing]
        known = {id(env): url for env, url in pairs}
        urls = [known.get(id(env)) for env in envs]
        pending = mine
        errors: dict[int, BaseException] = {}
        refusals = 0
        try:
            while pending:
                outcomes = run_all([envs[k].connect for k in pending], let_go, OPENING_AT_ONCE)
                refused: dict[int, OpenEnvError] = {}
                for k, out in zip(pending, outcomes, strict=True):
                    if not isinstance(out, BaseException):
                        continue
                    if isinstance(out, CapacityReached):
                        try:
                            self.check_overcommitted(envs[k], out)
                        except OpenEnvError as exc:
                            errors[k] = exc  # more sessions than the server holds: waiting cannot help
                            continue
                    if isinstance(out, OpenEnvError) and waits_for_capacity(out):
                        refused[k] = out
                    else:
                        errors[k] = out
                if errors or not refused:
                    errors.update(refused)
                    break
                delay = retry.delay(time.monotonic(), spread=random.random())
                if delay is None:
                    errors.update({k: retry.final(refusal) for k, refusal in refused.items()})
                    break
                refusals += 1
                held: list[int] = []
                if refusals > LET_GO_AFTER:
                    # a full server (not one refusing handshakes for a while: HTTP 503, its cap on pending ones)
                    full = {urls[k] for k, refusal in refused.items() if isinstance(refusal, CapacityReached)}
                    held = [k for k in mine if k not in refused and urls[k] in full and envs[k].connected]
                    run_all([envs[k].disconnect for k in held], let_go)  # its places, while it waits
                pending = sorted([*refused, *held])
                _pause(delay, stop)
        except BaseException:
            let_go()  # interrupted (or a bug): nothing this call opened stays open
            raise
        if errors:
            let_go()
            for failure in errors.values():
                if not isinstance(failure, Exception):
                    raise failure
            by_index = {indices[k]: failure for k, failure in sorted(errors.items())}
            ours = {i: e for i, e in by_index.items() if isinstance(e, OpenEnvError)}
            first = next(iter(by_index.values()))
            if len(ours) != len(by_index) or all(waits_for_capacity(e) for e in by_index.values()):
                raise first  # a full (or overloaded) server: its error says how long the pool waited
            raise PoolError(pool_error(PoolCall.OPENING, list(indices), {}, ours), {}, ours) from first

    def with_capacity(
        self,
        env: Env[Any, Any, Any],
        call: Callable[[], Any],
        wait: CapacityWait | None = None,
        stop: _Stop | None = None,
    ) -> Any:
        """``call()``, tried again with backoff while ``env``'s server is full (until the core gives up or ``stop``).

        The one capacity loop of the pool (opening a session, the first reset,
        a replacement): the core's ``CapacityRetry`` decides each delay, when to
        give up and what the error says; this only sleeps.
        """
        retry = (wait or CapacityWait(self.options.capacity_timeout, time.monotonic())).retry()
        while True:
            _check_stop(stop)
            try:
                return call()
            except (CapacityReached, ConnectError) as exc:
                if isinstance(exc, CapacityReached):
                    self.check_overcommitted(env, exc)
                delay = retry.after(exc, time.monotonic())
                if delay is None:
                    final = retry.final(exc)
                    if final is exc:
                        raise
                    raise final from None
                _pause(delay, stop)

    def check_overcommitted(self, env: Env[Any, Any, Any], exc: CapacityReached) -> None:
        """Raise at once when this pool puts more sessions on ``env``'s server than it holds (waiting cannot help)."""
        sessions = [*zip(self.sessions.envs, self.sessions.urls, strict=True), *self.sessions.growing]
        url = next((url for known, url in sessions if known is env), None)
        if url is None:
            return
        error = overcommit_error(
            exc,
            ours=sum(1 for _, known in sessions if known == url),
            sessions=len(sessions),
            servers=len(unique(self.sessions.providers)) if self.sessions.factory is not None else None,
            max_servers=self.sessions.max_servers,
        )
        if error is not None:
            raise error from None

    def retry_full(
        self, jobs: Sequence[Job], results: dict[int, StepResult[Any]], errors: dict[int, OpenEnvError]
    ) -> None:
        """Resets refused for capacity: tried again together, in rounds, within one ``capacity_timeout``.

        No hold and wait, as in `open_envs` (an OpenEnv server takes the
        WebSocket and refuses the session with its first reset): once a full
        server (``CAPACITY_REACHED``) has refused past the quick retries
        (`LET_GO_AFTER`), the sessions of this call that it did reset are let go
        too (disconnected, their results dropped, marked failed) while it waits,
        and all of them are reset again together after the core's delay, spread
        at random: pools sharing such a server take turns instead of each
        holding a part until ``capacity_timeout``.  A session that fails for
        another reason keeps that error; interrupted (Ctrl-C on the blocking
        twin, cancellation here), every session still waiting stays failed,
        with a fresh client.
        """
        pending = {job.index: job for job in jobs if waits_for_capacity(errors.get(job.index))}
        if not pending:
            return
        resets = {job.index: job for job in jobs if job.kind is JobKind.RESET}
        urls = self.sessions.urls
        retry = CapacityWait(self.options.capacity_timeout, time.monotonic()).retry()
        stop = _Stop()
        to_close: list[Env[Any, Any, Any]] | None = None  # what interrupted() has yet to close: a second one resumes

        def interrupted() -> None:
            nonlocal to_close
            stop.set = True  # the waits between tries end
            if to_close is None:  # each stays marked failed, with a fresh client (all renewed first, then closed)
                to_close = [self.sessions.envs[i] for i in sorted(pending)]
                for index in sorted(pending):
                    self.sessions.envs[index] = self.sessions.new_env(urls[index])
            while to_close:
                quietly(to_close.pop().close)

        refusals = 0
        try:
            while True:
                for index in sorted(pending):
                    error = errors[index]
                    if isinstance(error, CapacityReached):
                        try:
                            self.check_overcommitted(self.sessions.envs[index], error)
                        except OpenEnvError as exc:
                            errors[index] = exc  # more sessions than the server holds: waiting cannot help
                            del pending[index]
                            continue
                    if not waits_for_capacity(error):
                        del pending[index]
                if not pending or self.life.closed:  # closed meanwhile: _run says so
                    return
                delay = retry.delay(time.monotonic(), spread=random.random())
                if delay is None:
                    for index in pending:
                        errors[index] = retry.final(errors[index])
                    return
                refusals += 1
                if refusals > LET_GO_AFTER:
                    # its places on a full server, while it waits (not one refusing handshakes for a while: HTTP 503);
                    # a session checked out meanwhile (checkout() on another thread) is its borrower's
                    full = {urls[i]: e for i, e in errors.items() if i in pending and isinstance(e, CapacityReached)}
                    held: list[int] = []
                    with self.lock:
                        for index in sorted(resets):
                            if index in results and index not in pending and urls[index] in full:
                                if self.core.slots[index].checked_out:
                                    continue
                                pending[index] = resets[index]
                                errors[index] = full[urls[index]]
                                del results[index]
                                self.core.fail(index, errors[index])
                                held.append(index)
                    run_all([self.sessions.envs[i].disconnect for i in held], interrupted)
                _pause(delay, stop)
                order = sorted(pending)
                calls = [_bind(_connect_and_reset, self.sessions.envs[i], pending[i].kwargs or {}) for i in order]
                outcomes = run_all(calls, interrupted, OPENING_AT_ONCE)
                for index, outcome in zip(order, outcomes, strict=True):
                    if isinstance(outcome, OpenEnvError):
                        errors[index] = outcome
                    elif isinstance(outcome, BaseException):
                        raise outcome
                    else:
                        del errors[index], pending[index]
                        results[index] = outcome
                        with self.lock:
                            self.core.recovered(index, outcome)
        except BaseException:
            interrupted()
            raise

    def shrink(self, size: int) -> None:
        """``resize`` down: close the last sessions and stop the servers no kept session uses."""
        old = len(self.sessions.envs)
        with self.lock:
            self.core.resize(size)  # refuses (SessionBusy) before anything is dropped
        self.flight.forget(range(size, old))
        kept = unique(self.sessions.providers[:size])
        envs = self.sessions.envs[size:]
        providers = [p for p in unique(self.sessions.providers[size:]) if not any(p is k for k in kept)]
        del self.sessions.envs[size:], self.sessions.providers[size:], self.sessions.urls[size:]
        close_all(envs, providers)

    def grow(self, size: int) -> None:
        """``resize`` up: new sessions on the same servers or new ones, opened at once when the pool is open.

        Nothing is added when a server cannot be started or a session opened
        (what was started for them is stopped).
        """
        old = len(self.sessions.envs)
        indices = range(old, size)
        providers_new: list[Provider | None] = [None] * len(indices)
        started: list[Provider] = []
        if self.sessions.factory is not None:
            verify = self.sessions.env_options.get("verify")
            providers_new, urls, started = grow_servers(
                self.sessions.factory,
                self.sessions.providers,
                self.sessions.urls,
                indices,
                self.sessions.max_servers,
                self.sessions.ready_timeout,
                verify,
            )
        else:
            urls = [self.sessions.urls[i % old] for i in indices]
        envs_new = [self.sessions.new_env(url) for url in urls]
        if self.life.opened:
            self.sessions.growing = list(zip(envs_new, urls, strict=True))
            try:
                self.open_envs(envs_new, indices)
            except BaseException:
                run_all([env.close for env in envs_new], noop)
                stop_all(started)
                raise
            finally:
                self.sessions.growing = []
        self.sessions.envs += envs_new
        self.sessions.providers += providers_new
        self.sessions.urls += urls
        with self.lock:
            self.core.resize(size)

    def settle_failures(
        self,
        what: PoolCall,
        order: list[int],
        results: dict[int, StepResult[Any]],
        errors: dict[int, OpenEnvError],
        jobs: Sequence[Job] = (),
    ) -> None:
        """After ``step``/``reset``: replace the failed sessions (``on_failure="replace"``), or raise ``PoolError``.

        ``results`` gets each replaced session's new reset; ``errors[i]`` becomes
        the last replacement attempt's error where one failed too.  A session
        whose ``reset`` failed is replaced with that reset's arguments (its seed
        and keywords, from ``jobs``), as asked; after a failed ``step`` the new
        episode's reset has none.  A reset that a full server still refused
        when ``capacity_timeout`` ran out is reported, not replaced, unless the
        pool starts a server for that session alone: a new session on the same
        server would only wait again (once per attempt, session after session).
        """
        unreplaced: dict[int, PoolError] = {}
        waited: list[int] = []
        if self.core.on_failure == "replace":
            asked = {job.index: job.kwargs or {} for job in jobs if job.kind is JobKind.RESET}
            # (a reset call's refusals were waited for: retry_full; any other call's were not)
            waited = [
                i
                for i in asked
                if what.waits_for_capacity and waits_for_capacity(errors.get(i)) and not self.own_server(i)
            ]
            replaced, unreplaced = self.replace_all([i for i in sorted(errors) if i not in waited], asked)
            results.update(replaced)
            errors.update({i: exc.errors[i] for i, exc in unreplaced.items()})  # the last attempt's error
        else:
            self.explain_dead_servers(errors)
        failed = {i: e for i, e in errors.items() if i not in results}
        if failed:
            if waited:
                message = still_full_message(what, len(errors), len(order), {i: errors[i] for i in waited}, unreplaced)
            elif unreplaced:
                message = unreplaced_message(what, len(errors), len(order), unreplaced)
            else:
                message = pool_error(what, order, results, failed)
            raise PoolError(message, {i: results.get(i) for i in order}, failed)

    def own_server(self, index: int) -> bool:
        """Whether session ``index`` runs on a server the pool started for it alone (replacing it starts another)."""
        provider = self.sessions.providers[index] if index < len(self.sessions.providers) else None
        started = self.sessions.factory is not None and provider is not None
        return started and sum(p is provider for p in self.sessions.providers) == 1

    def explain_dead_servers(self, errors: dict[int, OpenEnvError]) -> None:
        """A lost session whose server (started by the pool) died: say so, and that ``replace(i)`` helps, not ``reset``.

        A ``reset`` of that session would only reach the dead address again.
        """
        deaths: dict[int, str | None] = {}  # by provider: sessions that share a server share its death
        for index, error in sorted(errors.items()):
            provider = self.sessions.providers[index] if index < len(self.sessions.providers) else None
            if provider is None or not isinstance(error, (ConnectError, SessionLost)) or isinstance(error, EnvTimeout):
                continue
            key = id(provider)
            if key not in deaths:
                deaths[key] = self.death(provider)
            reason = deaths[key]
            if reason is not None:
                message = dead_server_message(reason, replaced_by=f"pool.replace({index})")
                errors[index] = SessionLost(message) if isinstance(error, SessionLost) else ConnectError(message)

    def replace_completed(self, done: list[Completed[Any]]) -> list[Completed[Any]]:
        """After ``recv`` (``on_failure="replace"``): each failed completion replaced by its session's new reset.

        Raises:
            PoolError: some could not be replaced; the other completions are kept
                for the next ``recv()``.
        """
        failed = dict.fromkeys(c.index for c in done if c.error is not None and not c.replaced)
        replaced, unreplaced = self.replace_all(failed)
        out = [
            Completed(c.index, replaced[c.index], c.error, replaced=True) if c.index in replaced else c
            for c in done
            if c.index not in unreplaced
        ]
        if unreplaced:
            # the other completions are not lost: the next recv() returns them
            self.flight.ready = out + self.flight.ready
            kept = {c.index: c.result for c in out}
            raise PoolError(
                recv_unreplaced_message(unreplaced),
                {c.index: kept.get(c.index) for c in done},  # in order of arrival, None where unreplaced
                {i: unreplaced[i].errors[i] for i in sorted(unreplaced)},
            )
        return out

    def replace_all(
        self, indices: Iterable[int], resets: Mapping[int, Mapping[str, Any]] | None = None
    ) -> tuple[dict[int, StepResult[Any]], dict[int, PoolError]]:
        """With ``on_failure="replace"``: replace each failed session of ``indices`` (``step``, ``reset``, ``recv``).

        ``resets[i]``: the arguments of session ``i``'s new reset (default: none).
        Sessions of a shared server that died move one after another (each is
        placed where the ones before it went); the others are replaced at once
        (`OPENING_AT_ONCE` at a time), each with its own client and, where the
        pool started its server for it alone, its own new server: a server
        that stopped answering costs one ``connect_timeout``, not one per
        session.  Interrupted (Ctrl-C on the blocking twin, cancellation here),
        the sessions not replaced yet stay failed, with fresh clients, and the
        servers being started for them are stopped.

        Returns the new episodes' reset results, and for the sessions that
        could not be replaced the ``PoolError`` saying why.
        """
        resets = resets or {}
        replaced: dict[int, StepResult[Any]] = {}
        unreplaced: dict[int, PoolError] = {}
        indices = list(indices)
        while True:
            # the moves first, one after another; then the others are planned again, once the servers the
            # moved sessions went to are known (a server a move chose is shared now: not stopped, not restarted)
            plans = [self.plan(index) for index in indices]  # (a shared server's death is looked up once)
            moving = [plan for plan in plans if plan.moving]
            if not moving:
                break
            for plan in moving:
                try:
                    replaced[plan.index] = self.attempts(plan, resets.get(plan.index))
                except PoolError as exc:
                    unreplaced[plan.index] = exc
            indices = [plan.index for plan in plans if not plan.moving]
        if not plans:
            return replaced, unreplaced
        stop = _Replacing()
        to_close: list[Env[Any, Any, Any]] | None = None  # what interrupted() has yet to close: a second one resumes
        to_stop: list[Provider] = []

        def interrupted() -> None:
            nonlocal to_close
            if to_close is None:
                with self.lock:  # a session replaced from now on is not counted (its try sees stop.set)
                    stop.set = True
                    left = [plan.index for plan in plans if plan.index not in stop.done]
                    to_close = [self.sessions.envs[i] for i in left]
                    to_stop.extend(stop.providers[i] for i in left if i in stop.providers)
                    for index in left:  # each stays failed, with a fresh client; its handshake or read ends
                        self.sessions.envs[index] = self.sessions.new_env(self.sessions.urls[index])
            while to_stop:  # the servers being started for them: their starts end
                quietly(to_stop.pop().stop)
            while to_close:
                quietly(to_close.pop().close)

        calls = [_bind(self.attempts, plan, resets.get(plan.index), stop) for plan in plans]
        try:
            outcomes = run_all(calls, interrupted, OPENING_AT_ONCE)
        except BaseException:
            interrupted()  # (again after run_all's call: it resumes, closing what a second interrupt left)
            raise
        raised: BaseException | None = None
        for plan, outcome in zip(plans, outcomes, strict=True):
            if isinstance(outcome, PoolError):
                unreplaced[plan.index] = outcome
            elif isinstance(outcome, BaseException):
                raised = raised or outcome  # the pool closed meanwhile (EnvClosed), or a bug: after the others
            else:
                replaced[plan.index] = outcome
        if raised is not None:
            raise raised
        return replaced, unreplaced

    def death(self, provider: Provider) -> str | None:
        """Why ``provider``'s server died, else ``None`` (remembered: a stopped provider's check() knows no more)."""
        for known, why in self.sessions.dead_servers:
            if known is provider:
                return why
        reason = death_of(provider)
        if reason is not None:
            self.sessions.dead_servers.append((provider, reason))
        return reason

    def replace(self, index: int, kwargs: Mapping[str, Any] | None = None) -> StepResult[Any]:
        """Replace session ``index`` (``replace_attempts`` tries) and reset it with ``kwargs``; its first result."""
        return self.attempts(self.plan(index), kwargs)

    def plan(self, index: int) -> ReplacePlan:
        """How session ``index`` is replaced: moved (its shared server died), or renewed (on its own new server?)."""
        self.flight.forget([index])
        provider = self.sessions.providers[index]
        shared = provider is not None and sum(p is provider for p in self.sessions.providers) > 1
        # a server that died serves no one: its sessions move to a live server or a new one, within max_servers
        # (a shared one is checked here; one found dead before, its last session included, is remembered)
        pool_started = self.sessions.factory is not None
        moving = (
            pool_started
            and provider is not None
            and (shared or any(p is provider for p, _ in self.sessions.dead_servers))
            and self.death(provider) is not None
        )
        return ReplacePlan(
            index, self.options.replace_attempts, own_server=pool_started and (moving or not shared), moving=moving
        )

    def attempts(
        self, plan: ReplacePlan, kwargs: Mapping[str, Any] | None = None, stop: _Replacing | None = None
    ) -> StepResult[Any]:
        """The tries of ``plan``: the first new session that resets is the replacement (``stop``: one of several)."""
        index = plan.index
        while (delay := plan.next_try()) is not None:
            if delay:
                _pause(delay, stop)
            self.life.check_open()  # never a new session (or server) for a pool closed meanwhile
            try:
                if plan.moving:
                    result = self.move(index, kwargs)
                else:
                    result = self.renew(index, plan.own_server, kwargs, stop)
            except OpenEnvError as exc:
                plan.failed(exc)
                continue
            with self.lock:
                _check_stop(stop)  # interrupted meanwhile: the session stays failed, its client renewed
                self.core.replaced(index, result)
                if stop is not None:
                    stop.done.add(index)
                    stop.providers.pop(index, None)  # its server is the session's now
            return result
        raise plan.error() from plan.last

    def move(self, index: int, kwargs: Mapping[str, Any] | None = None) -> StepResult[Any]:
        """One replacement try for a session of a shared server that died: placed as ``resize`` places one, reset."""
        assert self.sessions.factory is not None
        old, dead = self.sessions.envs[index], self.sessions.providers[index]
        self.sessions.providers[index] = None
        quietly(old.close)
        if dead is not None and not any(p is dead for p in self.sessions.providers):  # its last session left: stop it
            quietly(dead.stop)  # (also a server an earlier try started, before this try starts another)
            self.sessions.dead_servers = [(p, r) for p, r in self.sessions.dead_servers if p is not dead]
        known = [p for p, _ in self.sessions.dead_servers]
        live = [None if p is None or any(p is d for d in known) else p for p in self.sessions.providers]
        verify = self.sessions.env_options.get("verify")
        providers, urls, started = grow_servers(
            self.sessions.factory,
            live,
            self.sessions.urls,
            [index],
            self.sessions.max_servers,
            self.sessions.ready_timeout,
            verify,
        )
        self.sessions.providers[index], self.sessions.urls[index] = providers[0], urls[0]
        env = self.sessions.envs[index] = self.sessions.new_env(urls[0])
        try:
            result: StepResult[Any] = self.with_capacity(env, _bind(_connect_and_reset, env, kwargs or {}))
        finally:
            if self.life.closed:  # close() ran meanwhile, after closing what was there: close what this try opened
                quietly(env.close)
                stop_all(started)
        self.life.check_open()
        return result

    def renew(
        self, index: int, own_server: bool, kwargs: Mapping[str, Any] | None = None, stop: _Replacing | None = None
    ) -> StepResult[Any]:
        """One replacement try: a new client (on a new server with ``own_server``), connected and reset."""
        _check_stop(stop)
        old, provider = self.sessions.envs[index], self.sessions.providers[index]
        self.sessions.envs[index] = self.sessions.new_env(self.sessions.urls[index])
        quietly(old.close)
        if own_server and self.sessions.factory is not None:
            if provider is not None:
                quietly(provider.stop)  # (still in the books meanwhile: an interrupt here leaves it to close())
                with self.lock:
                    self.sessions.dead_servers = [(p, r) for p, r in self.sessions.dead_servers if p is not provider]
            self.sessions.providers[index] = None
            provider = (make_providers(self.sessions.factory, [index]))[0]
            if stop is not None:
                with self.lock:
                    _check_stop(stop)
                    stop.providers[index] = provider  # an interrupt stops it: its start ends
            url = (
                start_providers(
                    [provider], self.sessions.ready_timeout, verify=self.sessions.env_options.get("verify")
                )
            )[0]
            with self.lock:
                _check_stop(stop)  # interrupted meanwhile: the server is stopped there, the session stays failed
                self.sessions.providers[index], self.sessions.urls[index] = provider, url
                self.sessions.envs[index] = self.sessions.new_env(url)
        env = self.sessions.envs[index]
        try:
            result: StepResult[Any] = self.with_capacity(
                env, _bind(_connect_and_reset, env, kwargs or {}), stop=stop
            )
        finally:
            if self.life.closed:  # close() ran meanwhile, after closing what was there: close what this try opened
                quietly(env.close)
                if own_server and provider is not None:
                    quietly(provider.stop)
        self.life.check_open()
        return result


def _connect_and_reset(env: Env[Any, Any, Any], kwargs: Mapping[str, Any]) -> StepResult[Any]:
    env.connect()
    return env.reset(**kwargs)


def _bind(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)


class _Stop:
    """Set when a call running sessions in parallel is interrupted: their waits between tries end."""

    __slots__ = ("set",)

    def __init__(self) -> None:
        self.set = False


class _Replacing(_Stop):
    """Replacements running at once: the sessions replaced, and the server being started for each of the others.

    An interrupt stops the servers of the sessions not replaced yet (their starts end).
    """

    __slots__ = ("done", "providers")

    def __init__(self) -> None:
        super().__init__()
        self.done: set[int] = set()
        self.providers: dict[int, Provider] = {}


def _check_stop(stop: _Stop | None) -> None:
    if stop is not None and stop.set:
        raise EnvClosed("interrupted while opening the session")


def _pause(seconds: float, stop: _Stop | None) -> None:
    """Sleep ``seconds``, in short slices when ``stop`` may end the wait early."""
    if stop is None:
        sleep(seconds)
        return
    end = time.monotonic() + seconds
    while not stop.set:
        left = end - time.monotonic()
        if left <= 0:
            return
        sleep(min(left, 0.05))
    _check_stop(stop)
