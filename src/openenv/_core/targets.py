"""What a target names: a URL, a Docker image, a Hugging Face Space or a checkout directory.

One rule for every entry point that takes a target string: ``Env.from_env``,
``Env.from_schema``, ``EnvPool.from_env``, ``environment_factory`` and every
command of ``python -m openenv``.  In this order:

1. ``docker:IMAGE`` is a Docker image, ``space:OWNER/NAME`` a Space (forced kinds);
2. ``scheme://...`` is a URL (``http``, ``https``, ``ws``, ``wss``; another
   scheme is an error, such as ``htp://host``), and so is ``localhost:PORT`` or
   ``IP:PORT`` (with a path, write the scheme);
3. a path (``./x``, ``../x``, ``/x``, ``~/x``, ``.``, ``..``) is a checkout
   directory, and one that does not exist is an error saying so;
4. an existing directory is a checkout;
5. ``owner/name`` (no tag) is a Space: its image
   ``<registry>/<owner>-<name>:<tag>`` (``use_docker``), else its hosted URL;
6. an image reference with a tag or digest (``name:tag``,
   ``registry:5000/team/name:tag``, ``name@sha256:...``) is a Docker image;
7. a bare name (no ``:``, no ``/``) is an installed environment package, named
   as OpenEnv's ``AutoEnv`` names it (``echo``, ``echo-env``, ``echo_env``,
   ``openenv-echo-env``): its default image (its manifest's, else
   ``<name-with-dashes>:latest``).  An image is never named without its tag:
   ``docker:NAME`` runs the image ``NAME`` (``:latest``) whatever is installed;
8. anything else is an error naming the kinds (for a bare name: the installed
   environment packages and how to install one).  Nothing is ever installed.

This module performs no IO: the caller passes what the filesystem says
(``is_dir``) and the registry it chose.  ``openenv._blocking.sources`` is
that caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .errors import CheckoutNotRunnable, InvalidURL
from .urls import DEFAULT_SPACE_REGISTRY, parse_base_url, redact_url, space_image, space_url

__all__ = [
    "Target",
    "TargetKind",
    "EnvPackage",
    "resolve_target",
    "is_path_shaped",
    "check_checkout",
    "env_key",
    "env_package",
    "KINDS",
]

TargetKind = Literal["url", "image", "checkout"]

#: The kinds of target, as error messages name them.
KINDS = (
    "a server URL (http://host:port), a Docker image (name:tag, or docker:NAME), "
    "a Hugging Face Space id (owner/name), an environment checkout directory "
    "or an installed environment package's name (echo_env)"
)

_HOST_PORT = re.compile(r"^(localhost|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d{1,5}/?$")
_SPACE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_IMAGE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::\d+)?/)?"  # an optional registry host[:port]/
    r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"  # the repository path
    r"(?::[\w][\w.-]{0,127}|@sha256:[0-9a-f]{64})$"  # a tag or a digest: required
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


_BARE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class EnvPackage:
    """An installed OpenEnv environment package, as OpenEnv's ``AutoEnv`` finds it.

    Attributes:
        key: the name it is found by (``"echo"`` for ``openenv-echo-env``).
        package: the distribution's name (``"openenv-echo-env"``).
        module: its import name (``"echo_env"``).
        default_image: the image it runs as (its manifest's ``image``, else ``<name-with-dashes>:latest``).
        client: ``module:Class`` of its client (``"echo_env.client:EchoEnv"``), adopted as the codec when it imports.
    """

    key: str
    package: str
    module: str
    default_image: str
    client: str


def env_key(name: str) -> str:
    """The key an environment is found by, as ``AutoEnv`` normalises names (``"echo-env"`` -> ``"echo"``).

    ``echo``, ``echo-env``, ``echo_env``, ``openenv-echo-env`` and ``openenv_echo_env`` are all ``echo``.
    """
    key = name.strip().lower()
    key = re.sub(r"^openenv[-_]", "", key)
    key = re.sub(r"[-_]env$", "", key)
    return key.replace("-", "_")


def env_package(package: str, manifest_name: str | None = None, manifest_image: str | None = None) -> EnvPackage:
    """What ``AutoEnv`` infers from a distribution ``openenv-<name>`` and its ``openenv.yaml`` (``name``, ``image``)."""
    module = re.sub(r"^openenv[-_]", "", package.lower()).replace("-", "_")
    env_name = (manifest_name or module).strip()
    if not env_name.endswith("_env"):
        env_name += "_env"
    base = env_name[: -len("_env")]
    client = "".join(word.capitalize() for word in base.split("_")) + "Env"
    image = manifest_image or f"{env_name.replace('_', '-')}:latest"
    return EnvPackage(env_key(env_name), package, module, image, f"{module}.client:{client}")


@dataclass(frozen=True)
class Target:
    """A resolved target.

    Attributes:
        kind: ``"url"`` (a running server), ``"image"`` (a Docker image to run)
            or ``"checkout"`` (a local directory to run as a process).
        target: the normalised URL, the image reference, or the directory as given
            (the caller makes it absolute).
        space: the Space id when the target named a Hugging Face Space.
        package: the environment package when the target named one (``kind`` is ``"image"``: its default image).
    """

    kind: TargetKind
    target: str
    space: str | None = None
    package: EnvPackage | None = None


def is_path_shaped(text: str) -> bool:
    """Whether ``text`` is written as a filesystem path (``./``, ``../``, ``/``, ``~``, ``.``, ``..``)."""
    return text in (".", "..") or text.startswith(("./", "../", "/", "~"))


def resolve_target(
    text: object,
    *,
    is_dir: Callable[[str], bool],
    expand: Callable[[str], str] = lambda path: path,
    use_docker: bool = True,
    tag: str = "latest",
    registry: str = DEFAULT_SPACE_REGISTRY,
    packages: Callable[[], Sequence[EnvPackage]] = lambda: (),
) -> Target:
    """Decide what ``text`` names (the rules are in the module docstring).

    Args:
        text: the target as the user wrote it.
        is_dir: whether a path is an existing directory (the caller's filesystem).
        expand: how to expand ``~`` (the caller's ``os.path.expanduser``).
        use_docker: a Space runs as its image (``True``) or is reached at its hosted URL.
        tag: the tag of a Space's image.
        registry: the registry of Space images.
        packages: the installed environment packages (the caller's
            ``importlib.metadata``); asked only for a bare name.

    Raises:
        InvalidURL: a URL with another scheme or no host, a path that is not an
            existing directory, or a string that names none of the kinds.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidURL(f"a target must be {KINDS}; got {text!r}")
    value = text.strip()
    if value.startswith("docker:"):
        image = value[len("docker:") :].strip()
        if not image:
            raise InvalidURL("docker: needs an image reference after it, such as docker:echo-env:latest")
        return Target("image", image)
    if value.startswith("space:"):
        return _space(value[len("space:") :].strip(), use_docker=use_docker, tag=tag, registry=registry)
    if _SCHEME.match(value) or _HOST_PORT.match(value):
        return Target("url", parse_base_url(value).base_url)
    if is_path_shaped(value):
        path = expand(value)
        if not is_dir(path):
            raise InvalidURL(
                f"{value!r}: no such directory ({path}); an environment checkout must be an existing directory"
            )
        return Target("checkout", path)
    if is_dir(value):
        return Target("checkout", value)
    if _SPACE.match(value):
        return _space(value, use_docker=use_docker, tag=tag, registry=registry)
    if _IMAGE.match(value):
        return Target("image", value)
    hint = ""
    if _BARE_NAME.match(value):
        installed = list(packages())
        key = env_key(value)
        for package in installed:
            if package.key == key:
                return Target("image", package.default_image, package=package)
        names = ", ".join(sorted(f"{p.key} ({p.package})" for p in installed)) or "none"
        hint = (
            f": no installed environment package is named so (installed: {names}; install one with "
            f"pip install openenv-{key.replace('_', '-')}-env, or from OpenEnv's source: pip install "
            f"'git+https://github.com/meta-pytorch/OpenEnv#subdirectory=envs/{key}_env'); "
            f"a Docker image needs its tag: {value}:latest, or docker:{value}; a directory: ./{value}"
        )
    raise InvalidURL(f"{redact_url(value)!r} is not {KINDS}{hint}")


def _space(space: str, *, use_docker: bool, tag: str, registry: str) -> Target:
    if not _SPACE.match(space):
        raise InvalidURL(f"not a Hugging Face Space id: {space!r}; expected 'owner/name'")
    if use_docker:
        return Target("image", space_image(space, tag=tag, registry=registry), space=space)
    return Target("url", space_url(space), space=space)


def check_checkout(directory: str, *, is_environment: bool, command_given: bool) -> None:
    """Refuse a checkout directory that holds no OpenEnv environment (unless a command runs it).

    ``is_environment``: the directory has an ``openenv.yaml`` or a ``server/app.py``.

    Raises:
        CheckoutNotRunnable: this directory is not an OpenEnv environment.
    """
    if is_environment or command_given:
        return
    raise CheckoutNotRunnable(
        f"{directory}: this directory is not an OpenEnv environment (no openenv.yaml, no server/app.py); "
        "give the directory of an environment checkout, or a command that starts its server "
        "(command=[...], or --command on the command line)",
        directory,
    )
