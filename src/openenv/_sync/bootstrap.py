# GENERATED from src/openenv/_async/bootstrap.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Start one or many environment servers: every provider starts before any is waited on.

``Env.from_provider`` (one server) and ``EnvPool`` (N servers) share this path.
"""

from __future__ import annotations

from collections.abc import Sequence

from .providers import Provider

__all__ = ["start_providers"]


def start_providers(providers: Sequence[Provider], ready_timeout: float | None) -> list[str]:
    """Start every provider, then wait until each server is ready; return their base URLs in order.

    On any failure (or an interrupt) every provider is stopped before the error propagates.
    """
    urls: list[str] = []
    try:
        for provider in providers:
            urls.append(provider.start())
        for provider, url in zip(providers, urls):
            provider.wait_until_ready(url, ready_timeout)
    except BaseException:
        for provider in providers:
            provider.stop()
        raise
    return urls
