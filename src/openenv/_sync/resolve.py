# GENERATED from src/openenv/_async/resolve.py by scripts/run_unasync.py -- DO NOT EDIT.
"""What ``Env`` and ``EnvPool`` resolve before they connect: a ``codec="schema"``, a checkout's provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._blocking.sources import checkout_app, is_environment_dir
from .._core.codec import Codec
from .._core.errors import ProtocolError
from .._core.options import ClientOptions
from .._core.targets import check_checkout
from .._core.urls import parse_base_url, redact_url
from .http import get_json
from .providers import CheckoutProvider

__all__ = ["schema_codec", "checkout_provider"]


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
