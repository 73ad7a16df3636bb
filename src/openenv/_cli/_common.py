"""What the commands share: output, JSON options, the target, the schema fetch."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

_OBS_LIMIT = 160


class _UsageError(Exception):
    """A bad command line (exit status 2)."""


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _num(value: Any) -> str:
    return "None" if value is None else f"{value:.6g}"


def _short(value: Any, limit: int = _OBS_LIMIT) -> str:
    text = json.dumps(_jsonable(value), default=str, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 3]}... ({len(text)} chars)"


def _load_json(text: str, option: str) -> Any:
    """The JSON of an option value, or of the file named by ``@path``."""
    source = text
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise _UsageError(f"{option} {source}: cannot read {text[1:]!r}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        shown = source if len(source) <= 80 else source[:77] + "..."
        raise _UsageError(
            f'{option} {shown!r} is not valid JSON ({exc}); write an object, e.g. {option} \'{{"message": "hi"}}\''
        ) from None


def _load_object(text: str, option: str) -> dict[str, Any]:
    value = _load_json(text, option)
    if not isinstance(value, dict):
        raise _UsageError(f"{option} must be a JSON object ({{...}}), not {type(value).__name__}: {text[:80]!r}")
    return value


class _Out:
    """Where ``run`` reports: short human lines, or one JSON object per line (``--json``)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def record(self, record: dict[str, Any], human: str) -> None:
        if self.as_json:
            print(json.dumps(record, default=str, ensure_ascii=False), flush=True)
        else:
            print(human, flush=True)

    def error(self, exc: BaseException, where: str = "") -> None:
        message = f"{where}{exc}"
        if self.as_json:
            record = {"type": "error", "error": type(exc).__name__, "message": message}
            print(json.dumps(record, default=str, ensure_ascii=False), flush=True)
        print(f"error: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _session(args: argparse.Namespace, out: _Out) -> Iterator[Any]:
    """A connected blocking client for ``args.target`` (an in-process echo server when it is ``None``)."""
    from openenv.sync import Env

    server = None
    try:
        target = args.target
        if target is None:
            from openenv.server import EnvServer
            from openenv.server.echo import EchoEnvironment

            server = EnvServer(EchoEnvironment, host="127.0.0.1", port=0).start()
            target = server.url
            out.note(f"started an in-process echo server on {target}")
        opened = time.perf_counter()
        env = _open_target(Env, target, args.ready_timeout)
        with env:
            if args.target is not None and env.provider is not None:
                out.note(f"started {target} in {time.perf_counter() - opened:.2f} s: {env.base_url}")
            yield env
    finally:
        if server is not None:
            server.stop()


def _fetch_schema(env: Any) -> dict[str, Any]:
    """The ``GET /schema`` object of ``env``'s server, with the client's own options (``verify``, headers, timeouts).

    Raises:
        ConnectError: the request failed.
        ProtocolError: the answer was not a JSON object.
    """
    from openenv._core.errors import ProtocolError
    from openenv._core.urls import redact_url
    from openenv._sync.http import get_json

    schema = get_json(env.base_url, "/schema", env.options)
    if not isinstance(schema, dict):
        raise ProtocolError(f"{redact_url(env.base_url)}/schema did not answer a JSON object")
    return schema


def _target_words(args: argparse.Namespace) -> str:
    import shlex

    return "" if args.target is None else " " + shlex.quote(args.target)


def _open_target(env_cls: Any, target: str, ready_timeout: float) -> Any:
    """A connected client for a run target: URL, local directory, Space id or Docker image.

    ``docker:IMAGE`` and ``space:OWNER/NAME`` force the kind; otherwise a URL
    (``scheme://``), an existing directory, an ``owner/name`` id without a tag
    (a Hugging Face Space) or else a Docker image reference is assumed.
    """
    import os
    import re

    if target.startswith("docker:"):
        return env_cls.from_docker_image(target[len("docker:") :], ready_timeout=ready_timeout)
    if target.startswith("space:"):
        return env_cls.from_env(target[len("space:") :], ready_timeout=ready_timeout)
    if "://" in target:
        return env_cls(target).connect()
    if os.path.isdir(target) or re.fullmatch(r"[\w.-]+/[\w.-]+", target):
        return env_cls.from_env(target, ready_timeout=ready_timeout)
    return env_cls.from_docker_image(target, ready_timeout=ready_timeout)


def _positive_or_zero(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


_TARGET_HELP = (
    "a server URL (http://..., https://...), a local environment checkout directory, a Hugging Face Space id "
    "(owner/name) or a Docker image; prefix docker: or space: to force the kind. Default: the built-in echo "
    "environment on an in-process server on 127.0.0.1"
)


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.startswith("openenv-twin") else "python -m openenv"


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", default=None, metavar="TARGET", help=_TARGET_HELP)
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long a started server may take to become healthy (default: 60)",
    )
