"""Which interpreter runs a local environment checkout: the decision, without IO.

``Env.from_env("path/to/checkout")`` serves the checkout's ASGI app with
``python -m uvicorn <app> --fd <fd>``.  The facts (does ``.venv/bin/python``
exist, where is ``uv``, can the current interpreter import the app) are
gathered by `openenv._blocking.checkout`; `choose_interpreter()`
applies the order documented in ``from_env``:

1. the checkout's own ``.venv`` (``.venv/bin/python``);
2. with ``install=True`` and no ``.venv``: create it, install the checkout into it, use it;
3. ``uv run --project <checkout> python`` when ``uv`` is on ``PATH``;
4. the current interpreter, when it can import ``uvicorn`` and the app;
5. otherwise [`CheckoutNotRunnable`][openenv.sync.CheckoutNotRunnable], naming every remedy.

Which app it serves is decided here too (`choose_app()`).  OpenEnv's
environments (chess, wildfire, coding, grid_world) declare ``app:
server.app:app`` in ``openenv.yaml``, but their ``server/app.py`` imports
relative to the package root (``from ..models import ...``) or the package by
name (``from coding_env.models import ...``): imported as ``server.app``, that
fails with "attempted relative import beyond top-level package".  Their
Dockerfiles run ``<package>.server.app:app`` instead, with the checkout
importable as ``<package>``; so does `choose_app()`, the package taken from
``pyproject.toml`` (`package_name()`) or the directory's name.
"""

from __future__ import annotations

import ast
import re
import shlex
import threading
from dataclasses import dataclass

from .errors import CheckoutNotRunnable

__all__ = [
    "CheckoutFacts",
    "Plan",
    "VENV",
    "INSTALL",
    "UV",
    "CURRENT",
    "PROBE",
    "choose_interpreter",
    "uvicorn_command",
    "not_runnable_message",
    "venv_python_path",
    "AppChoice",
    "package_name",
    "scan_app_source",
    "imported_siblings",
    "choose_app",
    "needs_package_app",
    "BEYOND_TOP_LEVEL",
]

VENV = "venv"
INSTALL = "install"
UV = "uv"
CURRENT = "current"
PROBE = "probe"


def venv_python_path(directory: str) -> str:
    """``<directory>/.venv/bin/python`` (``Scripts\\python.exe`` is not supported)."""
    return directory.rstrip("/") + "/.venv/bin/python"


@dataclass(frozen=True)
class CheckoutFacts:
    """What was found out about a checkout and this machine.

    Attributes:
        directory: the checkout (absolute).
        app: the ``module:attribute`` of its ASGI app.
        python: the current interpreter (``sys.executable``).
        venv_python: ``.venv/bin/python`` of the checkout if it exists, else ``None``.
        uv: the ``uv`` executable on ``PATH``, else ``None``.
        install: the caller's ``install=True`` opt-in.
        probed: whether the current interpreter was tried.
        probe_error: the last line of the probe's error (``""`` when it succeeded).
    """

    directory: str
    app: str
    python: str
    venv_python: str | None = None
    uv: str | None = None
    install: bool = False
    probed: bool = False
    probe_error: str = ""


@dataclass(frozen=True)
class Plan:
    """The decision: ``kind`` is one of ``venv``, ``install``, ``uv``, ``current`` or ``probe``.

    ``prefix`` is the command that stands for ``python`` (empty for ``probe``,
    which asks the caller to probe the current interpreter and decide again).
    """

    kind: str
    prefix: tuple[str, ...] = ()


def choose_interpreter(facts: CheckoutFacts) -> Plan:
    """Apply the documented order to ``facts``.

    Raises:
        CheckoutNotRunnable: nothing can run the checkout.
    """
    if facts.venv_python:
        return Plan(VENV, (facts.venv_python,))
    if facts.install:
        return Plan(INSTALL, (venv_python_path(facts.directory),))
    if facts.uv:
        return Plan(UV, (facts.uv, "run", "--project", facts.directory, "python"))
    if not facts.probed:
        return Plan(PROBE)
    if not facts.probe_error:
        return Plan(CURRENT, (facts.python,))
    raise CheckoutNotRunnable(not_runnable_message(facts), facts.directory, facts.probe_error)


def uvicorn_command(plan: Plan, app: str) -> list[str]:
    """The server command for ``plan``: ``<python> -m uvicorn <app> --fd {fd}``.

    ``{fd}`` is filled in with the listening socket handed to the server.
    """
    if not plan.prefix:
        raise ValueError(f"plan {plan.kind!r} has no interpreter")
    return [*plan.prefix, "-m", "uvicorn", app, "--fd", "{fd}"]


def not_runnable_message(facts: CheckoutFacts) -> str:
    """The error message when no interpreter can run the checkout: every remedy, concretely."""
    where = facts.directory
    quoted = shlex.quote(where)
    venv = shlex.quote(where.rstrip("/") + "/.venv")
    reason = facts.probe_error or "the import failed"
    return (
        f"cannot run the environment checkout {where}: it has no .venv, uv is not on PATH, and this "
        f"interpreter ({facts.python}) cannot import uvicorn and its app {facts.app!r}: {reason}\n"
        "Do one of these:\n"
        f"  * give the checkout its own environment: python -m venv {venv} && {venv}/bin/pip install -e {quoted}\n"
        "  * install uv (pip install uv); the checkout then runs with `uv run --project <checkout>`\n"
        "  * pass install=True to from_env to create the checkout's .venv and install it there\n"
        "  * pass command=[...] to from_env with your own server command "
        "(`{fd}` is replaced with a listening socket, `{port}` with a port)"
    )


# -- which app: the declared one, or the package-qualified one its Dockerfile runs ----------------

#: what Python says when a module imports relative to a package above its top level
BEYOND_TOP_LEVEL = "attempted relative import beyond top-level package"

_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*(?:#.*)?$")
_STRING = re.compile(r"""["']([^"']*)["']""")
_PAIR = re.compile(r"""["']?([\w.\-]*)["']?\s*=\s*["']([^"']*)["']""")


@dataclass(frozen=True)
class AppChoice:
    """The app a checkout's server runs.

    Attributes:
        app: ``module:attribute`` given to uvicorn.
        package: the checkout's package, importable from the parent of the
            checkout (``None`` when the declared app runs as it is).
        reason: why the package-qualified app was chosen (``""`` otherwise).
    """

    app: str
    package: str | None = None
    reason: str = ""

    @property
    def qualified(self) -> bool:
        """Whether this is the package-qualified app (the checkout imported as ``package``)."""
        return self.package is not None


def _setuptools_tables(text: str) -> dict[str, str]:
    """The bodies of ``[tool.setuptools]`` and ``[tool.setuptools.package-dir]`` (a small TOML reader)."""
    bodies: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            name = header.group(1).strip().replace('"', "").replace("'", "")
            current = bodies.setdefault(name, []) if name.startswith("tool.setuptools") else None
            continue
        if current is not None:
            current.append(_strip_comment(line))
    return {name: "\n".join(lines) for name, lines in bodies.items()}


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:index]
    return line


def _value(body: str, key: str, opening: str, closing: str) -> str | None:
    match = re.search(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=\s*\{opening}(.*?)\{closing}", body, re.M | re.S)
    return match.group(1) if match else None


def package_name(pyproject: str | None, directory_name: str) -> str | None:
    """The package a checkout is, as its ``pyproject.toml`` maps it (sans-IO: the file's text in).

    In order: the ``[tool.setuptools] package-dir`` entry that maps a package
    to the checkout's root (``{"chess_env" = "."}``, or the
    ``[tool.setuptools.package-dir]`` table); else the ``packages`` entry whose
    subpackages are listed with it (``["chess_env", "chess_env.server"]``);
    else ``directory_name`` when it is a Python identifier.  ``None`` when none
    of these names a package.
    """
    tables = _setuptools_tables(pyproject or "")
    mapping = _value(tables.get("tool.setuptools", ""), "package-dir", "{", "}")
    if mapping is None and "tool.setuptools.package-dir" in tables:
        mapping = tables["tool.setuptools.package-dir"]
    pairs: list[tuple[str, str]] = _PAIR.findall(mapping or "")
    for name, where in pairs:
        if name and where.strip() in (".", "./", "") and _IDENTIFIER.match(name):
            return name
    listed = _value(tables.get("tool.setuptools", ""), "packages", "[", "]")
    names: list[str] = _STRING.findall(listed or "")
    for name in names:
        if _IDENTIFIER.match(name) and any(other.startswith(name + ".") for other in names):
            return name
    return directory_name if _IDENTIFIER.match(directory_name) else None


_CATCH_IMPORT_ERROR = frozenset({"ImportError", "Exception", "BaseException"})  # not ModuleNotFoundError


def _guards_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        for name in names:
            if name is None or (isinstance(name, ast.Name) and name.id in _CATCH_IMPORT_ERROR):
                return True
    return False


def _module_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported, outside ``try: ... except ImportError``."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            found += _module_level_imports(node.body) + _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try) and not _guards_import_error(node):
            found += _module_level_imports(node.body)
    return found


#: One ``ast.parse`` at a time: CPython 3.11's AST construction keeps its recursion depth per
#: interpreter, so two threads parsing at once (a pool starting checkout servers together) fail
#: with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905).
_PARSING = threading.Lock()


def scan_app_source(source: str, module: str, package: str | None) -> str:
    """Why ``module`` (its source text given) cannot be imported under its declared name, or ``""``.

    A module-level import (not guarded by ``except ImportError``) that is
    relative beyond ``module``'s top-level package (``from ..models import X``
    in ``server/app.py``), or that imports ``package`` by name while
    ``module`` is not inside it, needs the checkout imported as ``package``.
    """
    try:
        with _PARSING:
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""  # the server's own error says it better
    depth = len(module.split("."))
    for node in _module_level_imports(tree.body):
        if isinstance(node, ast.ImportFrom) and node.level >= depth:
            dots = "." * node.level
            return f"{module} does `from {dots}{node.module or ''} import ...`: {BEYOND_TOP_LEVEL}"
        if package is None or module.split(".")[0] == package:
            continue
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name.split(".")[0] == package:
                return f"{module} imports its own package {package!r} by name"
    return ""


def imported_siblings(source: str, module: str) -> list[str]:
    """The modules of ``module``'s own package that its module-level relative imports load, in order.

    ``from .world import World`` in ``server/app.py`` loads ``server.world``;
    ``from . import rules`` may load ``server.rules``.  An import beyond the top
    level is not followed (`scan_app_source()` reports it).  OpenEnv's
    environments keep the import that needs the package one module further
    (``server/app.py`` imports ``server/<name>_environment.py``, which does
    ``from ..models import ...``): scanning these too finds it without a probe.
    """
    try:
        with _PARSING:
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    parts = module.split(".")
    found: list[str] = []
    for node in _module_level_imports(tree.body):
        if not isinstance(node, ast.ImportFrom) or node.level == 0 or node.level >= len(parts):
            continue
        base = parts[: len(parts) - node.level]
        if node.module:
            found.append(".".join(base + node.module.split(".")))
        else:
            found += [".".join(base + [alias.name]) for alias in node.names if alias.name != "*"]
    return [name for index, name in enumerate(found) if name not in found[:index]]


def needs_package_app(error: str, package: str | None) -> bool:
    """Whether an import error of the declared app means: run it as part of ``package``."""
    if BEYOND_TOP_LEVEL in error:
        return True
    return package is not None and f"No module named '{package}'" in error


def choose_app(declared: str, package: str | None, reason: str) -> AppChoice:
    """The app to serve: ``<package>.<declared>`` when ``reason`` says the declared one cannot import.

    ``reason`` comes from `scan_app_source()` or from an import error
    (`needs_package_app()`); a declared app already inside ``package``, or no
    package known, keeps the declared app.
    """
    if not reason or package is None or declared.split(".")[0] == package:
        return AppChoice(declared)
    return AppChoice(f"{package}.{declared}", package, reason)
