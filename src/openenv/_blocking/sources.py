"""What ``Env.from_env`` is given: a URL, a checkout or a Space id (reads the filesystem and environment)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .._core.errors import InvalidURL
from .._core.urls import DEFAULT_SPACE_REGISTRY, parse_base_url, space_image, space_subdomain, space_url

__all__ = ["Source", "classify_source", "checkout_app", "hosted_headers", "REGISTRY_ENV"]

#: Environment variable that overrides the registry of Space images.
REGISTRY_ENV = "OPENENV_SPACE_REGISTRY"


@dataclass(frozen=True)
class Source:
    """A classified ``from_env`` source.

    ``kind`` is ``"url"`` (a running server), ``"checkout"`` (a local
    directory to run as a process) or ``"image"`` (a Space's Docker image).
    ``target`` is the URL, the directory or the image reference.
    """

    kind: str
    target: str


def classify_source(
    source: str,
    *,
    use_docker: bool = True,
    tag: str = "latest",
    registry: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Source:
    """Decide how to reach ``source``.

    * ``http(s)://`` or ``ws(s)://`` URL → a running server;
    * an existing directory → a local checkout, run as a process;
    * ``owner/name`` → the Space's image ``<registry>/<subdomain>:<tag>`` when
      ``use_docker``, else the Space's hosted URL ``https://<subdomain>.hf.space``.
    """
    if not isinstance(source, str) or not source.strip():
        raise InvalidURL("from_env needs a URL, a local directory or a Space id 'owner/name'")
    text = source.strip()
    if "://" in text:
        return Source("url", parse_base_url(text).base_url)
    if os.path.isdir(text):
        return Source("checkout", os.path.abspath(text))
    try:
        space_subdomain(text)
    except InvalidURL:
        raise InvalidURL(
            f"{text!r} is not a URL, an existing directory, or a Hugging Face Space id 'owner/name'"
        ) from None
    if use_docker:
        chosen = registry or environ.get(REGISTRY_ENV) or DEFAULT_SPACE_REGISTRY
        return Source("image", space_image(text, tag=tag, registry=chosen))
    return Source("url", space_url(text))


def hosted_headers(
    base_url: str, headers: Mapping[str, str] | None, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """Headers for a hosted Space: ``Authorization: Bearer $HF_TOKEN`` when set.

    The token is only ever sent to ``*.hf.space`` hosts over TLS, and never replaces an
    ``Authorization`` header the caller gave.
    """
    result = dict(headers or {})
    token = environ.get("HF_TOKEN")
    host = parse_base_url(base_url).host.lower()
    secure = base_url.lower().startswith(("https://", "wss://"))
    if token and secure and host.endswith(".hf.space") and not any(k.lower() == "authorization" for k in result):
        result["Authorization"] = f"Bearer {token}"
    return result


_APP_LINE = re.compile(r"^app\s*:\s*['\"]?([\w.]+:[\w.]+)['\"]?\s*(#.*)?$")


def checkout_app(directory: str) -> str:
    """The ASGI app of an OpenEnv checkout: ``app:`` in its ``openenv.yaml``, else ``server.app:app``."""
    manifest = os.path.join(directory, "openenv.yaml")
    try:
        with open(manifest, encoding="utf-8") as handle:
            for line in handle:
                match = _APP_LINE.match(line.rstrip())
                if match:
                    return match.group(1)
    except OSError:
        pass
    return "server.app:app"
