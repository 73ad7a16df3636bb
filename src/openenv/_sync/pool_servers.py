# GENERATED from src/openenv/_async/pool_servers.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The servers an ``EnvPool`` starts: providers made by its factory, started together, stopped together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._core.errors import BootstrapError
from .._core.options import VerifyTypes
from .._core.servers import assign, grow, servers_needed
from .._shim_sync import run_all, run_blocking
from .bootstrap import start_providers
from .env import Env
from .providers import Provider

__all__ = [
    "first_servers",
    "grow_servers",
    "make_providers",
    "start_servers",
    "stop_all",
    "close_all",
    "unique",
    "noop",
    "quietly",
]


def first_servers(
    factory: Callable[[int], Provider],
    size: int,
    max_servers: int | None,
    ready_timeout: float | None,
    verify: VerifyTypes | None,
) -> tuple[list[Provider], list[Provider], list[str]]:
    """Start the servers of a new pool of ``size`` sessions (one each, up to ``max_servers``), in parallel.

    Returns:
        The providers started, and each session's provider and base URL
        (session ``i`` on server ``i % servers``).
    """
    count = servers_needed(size, None, max_servers)  # a server's limit is not known yet: one session each
    placement = assign(size, count)
    started = make_providers(factory, range(count))
    server_urls = start_servers(started, range(count), ready_timeout, verify)
    return started, [started[server] for server in placement], [server_urls[server] for server in placement]


def grow_servers(
    factory: Callable[[int], Provider],
    providers: Sequence[Provider | None],
    urls: Sequence[str],
    indices: Sequence[int],
    max_servers: int | None,
    ready_timeout: float | None,
    verify: VerifyTypes | None,
) -> tuple[list[Provider | None], list[str], list[Provider]]:
    """Place new sessions ``indices`` on the running servers or on new ones (started here, in parallel).

    Returns:
        Each new session's provider and base URL, and the providers started.
    """
    running = unique(providers)
    loads = [sum(p is server for p in providers) for server in running]
    chosen = grow(loads, len(indices), max_servers)
    fresh = [i for i, server in zip(indices, chosen, strict=True) if server >= len(running)]
    started = make_providers(factory, fresh)
    fresh_urls = start_servers(started, fresh, ready_timeout, verify) if started else []
    servers = [*running, *started]
    firsts = [next(i for i, q in enumerate(providers) if q is p) for p in running]
    server_urls = [urls[i] for i in firsts] + fresh_urls
    return [servers[server] for server in chosen], [server_urls[server] for server in chosen], started


def make_providers(factory: Callable[[int], Provider], indices: Sequence[int]) -> list[Provider]:
    """``factory(i)`` for each index (nothing is started); an error names the index.

    In a worker thread in the aio flavour: a factory may construct a cloud provider (an SDK client), which blocks.
    """
    providers: list[Provider] = []
    for index in indices:
        try:
            provider = run_blocking(factory, index)
        except Exception as exc:
            raise BootstrapError({index: exc}, len(indices)) from exc
        providers.append(provider)
    return providers


def start_servers(
    providers: Sequence[Provider], indices: Sequence[int], ready_timeout: float | None, verify: VerifyTypes | None
) -> list[str]:
    """``start_providers``; a failure is a ``BootstrapError`` keyed by session index (all were stopped)."""
    try:
        return start_providers(providers, ready_timeout, verify=verify)
    except BootstrapError as exc:
        raise BootstrapError({indices[i]: e for i, e in exc.failures.items()}, exc.total) from exc.__cause__
    except Exception as exc:
        if len(providers) != 1:
            raise
        raise BootstrapError({indices[0]: exc}, 1) from exc


def stop_all(providers: Sequence[Provider]) -> None:
    run_all([p.stop for p in providers], noop)


def unique(providers: Sequence[Provider | None]) -> list[Provider]:
    """The distinct providers (sessions that share a server share its provider), in order."""
    seen: list[Provider] = []
    for provider in providers:
        if provider is not None and not any(provider is known for known in seen):
            seen.append(provider)
    return seen


def close_all(envs: Sequence[Env[Any, Any, Any]], providers: Sequence[Provider]) -> None:
    """Close every client, then stop every provider; all of it even when some fails (the first failure is raised)."""
    outcomes = run_all([env.close for env in envs], noop)
    outcomes += run_all([p.stop for p in providers], noop)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def noop() -> None:
    """Nothing to undo when opening or closing sessions is interrupted."""


def quietly(fn: Callable[[], Any]) -> None:
    """``fn()``, ignoring its failure (replacing: the old session or server is gone either way)."""
    try:
        fn()
    except Exception:  # noqa: BLE001 - replacing: the old session or server is gone either way
        pass
