# GENERATED from src/openenv/_async/bootstrap.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Start one or many environment servers: every provider starts before any is waited on.

``Env.from_provider`` (one server) and ``EnvPool`` (N servers) share this path.
The starts run at once (tasks here; threads of a short-lived pool in the sync
twin, see ``run_all`` in the shims), so starting N containers takes about as
long as starting one; then the readiness waits run at once too, all begun
together with the same budget (one deadline for all).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from .._core.errors import BootstrapError
from .._core.options import VerifyTypes, check_timeout
from .._shim_sync import run_all
from .providers import Provider, ServerProvider

__all__ = ["start_providers"]


def start_providers(
    providers: Sequence[Provider], ready_timeout: float | None, *, verify: VerifyTypes | None = None
) -> list[str]:
    """Start every provider, then wait until each server is ready; return their base URLs in order.

    All ``start()`` calls run at once, then all ``wait_until_ready()`` calls
    run at once, each with ``ready_timeout``.  On any failure, or an
    interrupt (cancellation, Ctrl-C), every provider is stopped before the
    error propagates; a ``stop()`` that raises does not keep the others
    from being stopped.

    Args:
        providers: the providers, each used for one server.
        ready_timeout: seconds for the servers to answer (``None`` or ``inf``: no limit).
        verify: the client's ``verify=`` (``None``: not given), used by the
            health checks of each ``ServerProvider`` that does not override
            ``wait_until_ready``; the providers themselves are not changed.

    Returns:
        The base URL of each provider's server, in the order of ``providers``.

    Raises:
        InvalidOption: ``ready_timeout`` is ``nan``, zero or negative.
        BootstrapError: some of several providers failed (``failures`` says which, and why).
        ProviderError: the only provider failed: its own error, unchanged
            (``ContainerExited``, ``ImageNotFound``, ``ReadinessTimeout``, ...).
    """
    providers = list(providers)
    ready_timeout = check_timeout("ready_timeout", ready_timeout)
    if not providers:
        return []

    def stop_all() -> None:
        _stop_all(providers)

    try:
        started = run_all([provider.start for provider in providers], stop_all)
        failures = _failures(started)
        if not failures:
            urls = [str(url) for url in started]
            pairs = zip(providers, urls, strict=True)
            waits = [_ready_wait(p, url, ready_timeout, verify) for p, url in pairs]
            failures = _failures(run_all(waits, stop_all))
            if not failures:
                return urls
    except BaseException:
        _stop_all(providers)
        raise
    _stop_all(providers)
    raise _error(failures, len(providers))


def _ready_wait(
    provider: Provider, url: str, ready_timeout: float | None, verify: VerifyTypes | None
) -> Callable[[], Any]:
    """``provider.wait_until_ready(url, ready_timeout)``, with the client's ``verify`` when one was given.

    A ``ServerProvider`` whose readiness wait is the built-in one polls with
    ``verify``; any other provider (or an override) is called as the protocol says.
    """
    if (
        verify is not None
        and isinstance(provider, ServerProvider)
        and type(provider).wait_until_ready is ServerProvider.wait_until_ready
    ):
        return functools.partial(provider._poll_health, url, ready_timeout, verify)
    return functools.partial(provider.wait_until_ready, url, ready_timeout)


def _failures(results: Sequence[object]) -> dict[int, BaseException]:
    return {index: result for index, result in enumerate(results) if isinstance(result, BaseException)}


def _error(failures: dict[int, BaseException], total: int) -> BaseException:
    if total == 1:
        return failures[0]  # a single server: its own error, unchanged
    for exc in failures.values():
        if not isinstance(exc, Exception):  # a cancellation or an exit inside one of them: not a failure to list
            return exc
    error = BootstrapError(failures, total)
    error.__cause__ = next(iter(error.failures.values()))
    return error


def _stop_all(providers: Sequence[Provider]) -> None:
    """Stop every provider (all at once); one whose ``stop()`` raises does not keep the others running."""

    def noop() -> None:
        return None

    run_all([provider.stop for provider in providers], noop)
