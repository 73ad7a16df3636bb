"""What a target names, with this machine's filesystem and environment (the rules: ``_core/targets.py``)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from typing import Any

from .._core.targets import EnvPackage, Target, env_package, resolve_target
from .._core.urls import DEFAULT_SPACE_REGISTRY, parse_base_url

__all__ = [
    "Source",
    "classify_source",
    "checkout_app",
    "hosted_headers",
    "is_environment_dir",
    "installed_env_packages",
    "REGISTRY_ENV",
]

#: Environment variable that overrides the registry of Space images.
REGISTRY_ENV = "OPENENV_SPACE_REGISTRY"


#: A resolved target (the rules: `openenv._core.targets`).
Source = Target


def classify_source(
    source: str,
    *,
    use_docker: bool = True,
    tag: str = "latest",
    registry: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Target:
    """Decide how to reach ``source``, with this machine's filesystem (`openenv._core.targets.resolve_target`).

    A checkout directory comes back absolute; a Space's image uses ``registry``,
    else ``$OPENENV_SPACE_REGISTRY``, else ``registry.hf.space``.

    Raises:
        InvalidURL: ``source`` names no URL, image, Space or existing directory.
    """
    chosen = registry or environ.get(REGISTRY_ENV) or DEFAULT_SPACE_REGISTRY
    where = resolve_target(
        source,
        is_dir=os.path.isdir,
        expand=_expand,
        use_docker=use_docker,
        tag=tag,
        registry=chosen,
        packages=installed_env_packages,
    )
    if where.kind == "checkout":
        return Target("checkout", os.path.abspath(where.target))
    return where


#: distributions named ``openenv-*`` that are not environments
_NOT_ENVIRONMENTS = frozenset({"openenv-core", "openenv-twin"})
_MANIFEST_KEY = re.compile(r"^(name|image)\s*:\s*['\"]?([^'\"#\s]+)['\"]?\s*(#.*)?$")


def installed_env_packages() -> list[EnvPackage]:
    """The OpenEnv environment packages installed here (``openenv-<name>`` distributions), as ``AutoEnv`` finds them.

    Read from the distributions' metadata and their ``openenv.yaml`` (nothing is imported or installed):
    a distribution counts when its module (``openenv-echo-env`` -> ``echo_env``) is one of its files.
    """
    import importlib.metadata

    found: dict[str, EnvPackage] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        canonical = re.sub(r"[-_.]+", "-", name).lower()
        if not canonical.startswith("openenv-") or canonical in _NOT_ENVIRONMENTS:
            continue
        module = canonical[len("openenv-") :].replace("-", "_")
        manifest = _manifest(dist, module)
        if manifest is None:
            continue
        package = env_package(canonical, manifest.get("name"), manifest.get("image"))
        found.setdefault(package.key, package)
    return list(found.values())


def _manifest(dist: Any, module: str) -> dict[str, str] | None:
    """``name`` and ``image`` of the package's ``<module>/openenv.yaml`` (``{}`` without one); ``None``: no module."""
    text = None
    files = dist.files or []
    if any(f.parts and f.parts[0] == module for f in files):
        for file in files:
            if tuple(file.parts) == (module, "openenv.yaml"):
                with contextlib.suppress(OSError):
                    text = file.read_text(encoding="utf-8")
    else:  # an editable install: its files are elsewhere (find_spec does not import a top-level module)
        import importlib.util

        editable = _editable(dist)
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            return None
        for location in spec.submodule_search_locations:
            with contextlib.suppress(OSError), open(os.path.join(location, "openenv.yaml"), encoding="utf-8") as f:
                text = f.read()
                break
        if text is None and not editable:
            # a distribution without that module, and what find_spec found has no manifest: another distribution's
            # (openenv-sprites, a provider plugin, ships no ``sprites``; that is the sprites SDK's module). An
            # editable install without PEP 610's record (an egg-link) still counts by its manifest.
            return None
    manifest: dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _MANIFEST_KEY.match(line.rstrip())
        if match:
            manifest.setdefault(match.group(1), match.group(2))
    return manifest


def _editable(dist: Any) -> bool:
    """Whether ``dist`` is an editable install (PEP 610: ``direct_url.json`` says ``"editable": true``)."""
    import json

    try:
        text = dist.read_text("direct_url.json")
        return bool(text) and json.loads(text).get("dir_info", {}).get("editable") is True
    except (OSError, ValueError, AttributeError):
        return False


def _expand(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def is_environment_dir(directory: str) -> bool:
    """Whether ``directory`` holds an OpenEnv environment: an ``openenv.yaml`` or a ``server/app.py``."""
    return os.path.isfile(os.path.join(directory, "openenv.yaml")) or os.path.isfile(
        os.path.join(directory, "server", "app.py")
    )


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
