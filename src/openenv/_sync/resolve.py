# GENERATED from src/openenv/_async/resolve.py by scripts/run_unasync.py -- DO NOT EDIT.
"""What ``Env`` and ``EnvPool`` resolve before they connect: a ``codec="schema"``, a checkout's provider."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .._blocking.sources import checkout_app, classify_source, is_environment_dir
from .._core.codec import Codec
from .._core.errors import InvalidURL, ProtocolError
from .._core.options import ClientOptions
from .._core.targets import Target, check_checkout
from .._core.urls import parse_base_url, redact_url
from .._shim_sync import run_blocking
from .http import get_json
from .providers import CheckoutProvider

__all__ = ["schema_codec", "checkout_provider", "package_codec", "locate", "locate_for_provider", "where_is"]

logger = logging.getLogger("openenv.targets")


def schema_codec(codec: Any, base_url: str, options: Mapping[str, Any]) -> Any:
    """``codec``, or for ``codec="schema"`` the codec built from the server's ``GET /schema``.

    Raises:
        ConnectError: ``/schema`` could not be fetched.
        ProtocolError: ``/schema`` did not answer a JSON object.
    """
    if not (isinstance(codec, str) and codec == "schema"):
        return codec
    schema = get_json(base_url, "/schema", ClientOptions.of(options))
    if not isinstance(schema, dict):
        raise ProtocolError(f"{redact_url(parse_base_url(base_url).http('/schema'))} did not answer a JSON object")
    return Codec.from_schema(schema)


def where_is(source: str, *, use_docker: bool = True, tag: str = "latest", registry: str | None = None) -> Target:
    """What ``source`` names (`classify_source`), read off the event loop.

    Naming a target reads this machine: the filesystem for a checkout, and for
    a bare name every installed distribution's metadata (an environment
    package's).  In ``openenv.aio`` that runs in a worker thread, so other
    sessions on the loop go on meanwhile.

    Raises:
        InvalidURL: ``source`` names no URL, image, Space, package or existing directory.
    """
    return run_blocking(classify_source, source, use_docker=use_docker, tag=tag, registry=registry)


def locate(
    source: str, codec: Any, *, use_docker: bool = True, tag: str = "latest", registry: str | None = None
) -> tuple[Target, Any]:
    """What ``source`` names and the codec its sessions use (`package_codec`: a package's own client).

    Both read this machine, and typing with a package's client imports it (an
    ``openenv.core`` import takes seconds), so in ``openenv.aio`` the two run
    in a worker thread: the event loop is never held.

    Raises:
        InvalidURL: ``source`` names no URL, image, Space, package or existing directory.
    """

    def work() -> tuple[Target, Any]:
        where = classify_source(source, use_docker=use_docker, tag=tag, registry=registry)
        return where, package_codec(codec, where)

    return run_blocking(work)


def locate_for_provider(source: str, codec: Any) -> tuple[Target | None, Any]:
    """`locate` for ``from_env(source, provider=p)``: ``None`` for a provider's own source (``hf://owner/space``)."""

    def work() -> tuple[Target | None, Any]:
        try:
            where: Target | None = classify_source(source)
        except InvalidURL:
            where = None
        return where, package_codec(codec, where)

    return run_blocking(work)


def package_codec(codec: Any, where: Target | None) -> Any:
    """``codec``; for an environment package's target with no codec given, its own client class when it imports.

    The client (``<module>.client:<Name>Env``, as ``AutoEnv`` infers it) is
    adopted as the codec ([`Codec.from_client()`][openenv.sync.Codec.from_client]);
    when it cannot be imported or adopted (its ``openenv.core`` is missing, say), plain dicts,
    and the logger ``openenv.targets`` says why.
    """
    package = where.package if where is not None else None
    if codec is not None or package is None:
        return codec
    module, _, name = package.client.partition(":")
    try:
        client = getattr(importlib.import_module(module), name)
        return Codec.from_client(client)
    except Exception as exc:  # noqa: BLE001 - typing the client is optional: dicts work with any server
        logger.info(
            "%s: not typed with %s (%s: %s); plain dicts", package.package, package.client, type(exc).__name__, exc
        )
        return None


def checkout_provider(
    directory: str,
    command: Sequence[str] | None,
    env_vars: Mapping[str, str] | None,
    port: int | None,
    install: bool = False,
) -> CheckoutProvider:
    """The provider for an environment checkout directory (the interpreter is chosen when it starts).

    Raises:
        CheckoutNotRunnable: without ``command``, a directory that holds no OpenEnv environment.
    """
    check_checkout(directory, is_environment=is_environment_dir(directory), command_given=command is not None)
    app = checkout_app(directory)
    return CheckoutProvider(directory, app=app, command=command, env=env_vars, port=port, install=install)
