"""The IO behind running a local environment checkout: gather facts, probe, install.

The decisions themselves are `openenv._core.checkout.choose_interpreter()`
(which Python) and `openenv._core.checkout.choose_app()` (which app).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from .._core.checkout import (
    INSTALL,
    PROBE,
    AppChoice,
    CheckoutFacts,
    Plan,
    choose_app,
    choose_interpreter,
    imported_siblings,
    needs_package_app,
    package_name,
    scan_app_source,
    venv_python_path,
)
from .._core.errors import ProviderError

__all__ = ["gather_facts", "probe_current", "install_checkout", "Launch", "prepare", "app_choice", "package_root"]

logger = logging.getLogger("openenv.checkout")

#: Seconds the current interpreter gets to import uvicorn and the app.
PROBE_TIMEOUT = 60.0
#: Seconds ``install=True`` gets to create the venv and pip-install the checkout.
INSTALL_TIMEOUT = 1800.0

_PROBE = "import sys, importlib\nimport uvicorn\nimportlib.import_module(sys.argv[1])\n"


def gather_facts(directory: str, app: str, *, install: bool = False) -> CheckoutFacts:
    """What is on disk and on ``PATH`` (no probe yet)."""
    venv = venv_python_path(directory)
    return CheckoutFacts(
        directory=directory,
        app=app,
        python=sys.executable,
        venv_python=venv if os.path.exists(venv) else None,
        uv=shutil.which("uv"),
        install=install,
    )


def _last_line(text: str) -> str:
    """The exception the child raised (its last traceback's), not a banner line it printed."""
    from .._core.errors import last_meaningful_line

    return last_meaningful_line(text)


def probe_current(
    directory: str, app: str, timeout: float = PROBE_TIMEOUT, env: Mapping[str, str] | None = None
) -> str:
    """Whether this interpreter can import ``uvicorn`` and ``app``'s module, as the server would.

    Runs in a subprocess (importing the app may have side effects), in
    ``directory``, with the server's environment: ``env`` over ``os.environ``
    (the ``env_vars`` given to ``from_env`` and the ``PYTHONPATH`` the server
    gets; ``directory`` when ``env`` sets none).  Returns ``""`` on success,
    else the last line of the error.  Probes of the same checkout, app module
    and environment share one run, and a success answers for
    `PROBE_MEMO_SECONDS` (or until the app module's file changes).
    """
    module = app.partition(":")[0]
    environment = _probe_environment(directory, env)
    key = _probe_key(directory, module, environment)
    with _PROBES_GUARD:
        now = time.monotonic()
        for old in [k for k, at in _PROBED_OK.items() if now - at > PROBE_MEMO_SECONDS]:
            del _PROBED_OK[old]
        if key in _PROBED_OK:
            return ""
        running = _IN_FLIGHT.get(key)
        mine = running is None
        if running is None:
            running = _IN_FLIGHT[key] = concurrent.futures.Future()
    if not mine:  # the servers of a pool start at once: the first one's probe answers them all
        shared = running.result()
        return shared if shared is not None else _probe(directory, module, environment, timeout)
    error: str | None = None
    try:
        error = _probe(directory, module, environment, timeout)
        return error
    finally:
        with _PROBES_GUARD:
            del _IN_FLIGHT[key]
            if error == "":
                _PROBED_OK[key] = time.monotonic()
        running.set_result(error)  # None (interrupted): each waiter probes for itself


#: Seconds a successful probe answers for (`probe_current`): a pool or ``environment_factory`` starts one server per
#: session of a one-session checkout, each from a new provider, and one probe (a fresh interpreter importing the
#: app's stack: 0.5 s to seconds of CPU) serves them all. A failure is not kept, so a checkout that was fixed is
#: probed again at once; a success is kept this long, or until the app module's file changes.
PROBE_MEMO_SECONDS = 300.0

_PROBES_GUARD = threading.Lock()
#: key (`_probe_key`) -> when a probe with it succeeded (``time.monotonic()``)
_PROBED_OK: dict[str, float] = {}
#: key -> the probe running now (its result: the error, ``""``, or ``None`` when it was interrupted)
_IN_FLIGHT: dict[str, concurrent.futures.Future[str | None]] = {}


#: key of a declared app's probe (`_probe_key`) -> (when, the package-qualified app that ran instead): a declared app
#: that failed only because its package imports beyond its top level (`needs_package_app`), and whose qualified app
#: then imported.  The next server of the checkout goes to the qualified app at once, without the failing probe
#: again (each of a pool's one-session servers paid one); kept as long as a success (`PROBE_MEMO_SECONDS`).
_QUALIFIED: dict[str, tuple[float, AppChoice]] = {}


def _probe_environment(directory: str, env: Mapping[str, str] | None) -> dict[str, str]:
    """The probe's environment: ``env`` over ``os.environ``, ``PYTHONPATH`` the checkout unless ``env`` sets one."""
    return {**os.environ, "PYTHONPATH": directory, **(env or {})}


def _qualified_before(key: str) -> AppChoice | None:
    """The qualified app that ran instead of the declared one whose probe has ``key``, if recently."""
    with _PROBES_GUARD:
        found = _QUALIFIED.get(key)
        if found is not None and time.monotonic() - found[0] > PROBE_MEMO_SECONDS:
            del _QUALIFIED[key]
            found = None
    return found[1] if found is not None else None


def _probe_key(directory: str, module: str, environment: Mapping[str, str]) -> str:
    """What a probe's answer depends on: the checkout, the app module and its file, the environment."""
    facts = (os.path.realpath(directory), module, _source_stamp(directory, module), sorted(environment.items()))
    return hashlib.sha256(repr(facts).encode("utf-8", "surrogateescape")).hexdigest()


def _source_stamp(directory: str, module: str) -> tuple[int, int] | None:
    """The app module's file: its size and modification time.

    ``module`` is relative to the checkout (``server.app``) or qualified with the
    checkout's package name (``my_env.server.app``: the package is the checkout).
    """
    parts = module.split(".")
    for names in [parts, parts[1:]] if len(parts) > 1 else [parts]:
        base = os.path.join(directory, *names)
        for path in (base + ".py", os.path.join(base, "__init__.py")):
            try:
                stat = os.stat(path)
            except OSError:
                continue
            return stat.st_size, stat.st_mtime_ns
    return None


def _probe(directory: str, module: str, environment: Mapping[str, str], timeout: float) -> str:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, module],
            cwd=directory,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"importing {module} did not finish within {timeout:g} s"
    except OSError as exc:
        return f"cannot run {sys.executable}: {exc.strerror or exc}"
    if done.returncode == 0:
        return ""
    return _last_line(done.stderr.decode("utf-8", "replace")) or f"exit code {done.returncode}"


def install_checkout(directory: str, timeout: float = INSTALL_TIMEOUT) -> str:
    """Create ``<directory>/.venv`` and ``pip install -e <directory> uvicorn`` into it; return its Python.

    A ``.venv`` this call created is removed again if the install fails.

    Raises:
        ProviderError: creating the venv or installing failed (with the last output lines).
    """
    # several providers of one checkout (a pool) start at once: one installs, the others then find it
    with _install_lock(directory):
        return _install_checkout(directory, timeout)


_INSTALL_LOCKS: dict[str, threading.Lock] = {}
_INSTALL_LOCKS_GUARD = threading.Lock()


def _install_lock(directory: str) -> threading.Lock:
    with _INSTALL_LOCKS_GUARD:
        return _INSTALL_LOCKS.setdefault(os.path.realpath(directory), threading.Lock())


def _install_checkout(directory: str, timeout: float) -> str:
    venv = os.path.join(directory, ".venv")
    python = venv_python_path(directory)
    if os.path.exists(python):
        return python
    if os.path.lexists(venv):
        raise ProviderError(f"install=True: {venv} exists but has no bin/python; remove it or repair it")
    steps = [
        [sys.executable, "-m", "venv", venv],
        [python, "-m", "pip", "install", "--disable-pip-version-check", "-e", directory, "uvicorn"],
    ]
    with tempfile.TemporaryFile(prefix="openenv-install-") as log:
        try:
            for step in steps:
                try:
                    done = subprocess.run(
                        step,
                        cwd=directory,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        timeout=timeout,
                        check=False,
                    )
                    code: int | str = done.returncode
                except subprocess.TimeoutExpired:
                    code = f"timeout after {timeout:g} s"
                except OSError as exc:
                    code = exc.strerror or str(exc)
                if code != 0:
                    log.seek(0)
                    tail = "\n".join(log.read().decode("utf-8", "replace").splitlines()[-15:])
                    raise ProviderError(
                        f"install=True: `{' '.join(step)}` failed ({code}) for the checkout {directory}"
                        + (f"; last output lines:\n{tail}" if tail else "")
                    )
        except BaseException:
            with contextlib.suppress(OSError):
                shutil.rmtree(venv)
            raise
    return python


@dataclass(frozen=True)
class Launch:
    """How to run a checkout's server: the interpreter, the app, and the server's ``PYTHONPATH``."""

    plan: Plan
    choice: AppChoice
    pythonpath: str


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def app_choice(directory: str, app: str) -> tuple[AppChoice, str | None]:
    """The app to serve, decided from the checkout's ``pyproject.toml`` and its app module's source.

    Returns:
        The choice and the checkout's package name (``None`` when unknown).
    """
    directory = directory.rstrip("/") or "/"
    package = package_name(_read(os.path.join(directory, "pyproject.toml")), os.path.basename(directory))
    module = app.partition(":")[0]
    reason = ""
    # the app module, then the modules of its package it imports relatively, and theirs (a bounded walk)
    waiting, seen = [module], {module}
    while waiting and not reason and len(seen) <= SCAN_MODULES:
        name = waiting.pop(0)
        source, is_package = _module_source(directory, name)
        if source is None:
            continue
        # a package's __init__ imports relative to the package itself: scanned as <package>.__init__
        scanned = name + ".__init__" if is_package else name
        reason = scan_app_source(source, scanned, package)
        for sibling in imported_siblings(source, scanned):
            if sibling not in seen:
                seen.add(sibling)
                waiting.append(sibling)
    return choose_app(app, package, reason), package


#: At most this many modules of the checkout are read when choosing the app (`app_choice`).
SCAN_MODULES = 32


def _module_source(directory: str, module: str) -> tuple[str | None, bool]:
    """The source of the checkout's ``module`` (``server.app``: ``server/app.py`` or ``server/app/__init__.py``),
    and whether it is a package's ``__init__.py``."""
    base = os.path.join(directory, *module.split("."))
    source = _read(base + ".py")
    if source is not None:
        return source, False
    source = _read(os.path.join(base, "__init__.py"))
    return source, source is not None


def package_root(directory: str, package: str) -> str:
    """A directory from which ``import <package>`` finds the checkout.

    The checkout's parent when the checkout is named ``package``; else a
    private directory (``$TMPDIR/openenv-packages-<uid>/<hash>``) holding a
    symbolic link ``<package>`` to the checkout, made once and reused.
    """
    directory = os.path.realpath(directory)
    if os.path.basename(directory) == package:
        return os.path.dirname(directory)
    digest = hashlib.sha256(directory.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    top = os.path.join(tempfile.gettempdir(), f"openenv-packages-{os.getuid()}")
    os.makedirs(top, mode=0o700, exist_ok=True)
    if os.stat(top).st_uid != os.getuid() or not os.path.isdir(top) or os.path.islink(top):
        raise ProviderError(f"{top} is not a private directory of this user; remove it")
    root = os.path.join(top, digest)
    os.makedirs(root, mode=0o700, exist_ok=True)
    link = os.path.join(root, package)
    if os.path.islink(link) and os.path.realpath(link) == directory:
        return root
    with contextlib.suppress(FileNotFoundError):
        os.unlink(link)
    with contextlib.suppress(FileExistsError):  # another provider of the checkout made it meanwhile
        os.symlink(directory, link, target_is_directory=True)
    return root


def _pythonpath(directory: str, choice: AppChoice, given: str | None) -> str:
    parts = [package_root(directory, choice.package)] if choice.package is not None else []
    parts.append(given if given is not None else directory)
    return os.pathsep.join(parts)


def prepare(directory: str, app: str, *, install: bool = False, env: Mapping[str, str] | None = None) -> Launch:
    """Choose the app and the interpreter, probing the current one if it comes to that; install if asked.

    ``env`` is the server's extra environment (``env_vars``; a ``PYTHONPATH``
    in it replaces the default, the checkout).  The probe runs with it, so an
    app that reads its settings at import sees them.

    Raises:
        CheckoutNotRunnable: nothing can run the checkout.
        ProviderError: ``install=True`` failed.
    """
    env = dict(env or {})
    given = env.get("PYTHONPATH")
    choice, package = app_choice(directory, app)
    facts = gather_facts(directory, choice.app, install=install)
    plan = choose_interpreter(facts)
    if plan.kind == PROBE:
        path = _pythonpath(directory, choice, given)
        declared = {**env, "PYTHONPATH": path}
        declared_key = _probe_key(directory, choice.app.partition(":")[0], _probe_environment(directory, declared))
        known = _qualified_before(declared_key) if not choice.qualified else None
        error = "not probed"
        if known is not None:  # this checkout's declared app needed its package a moment ago: go there at once
            if not probe_current(directory, known.app, env={**env, "PYTHONPATH": _pythonpath(directory, known, given)}):
                choice, error = known, ""
        if error:
            error = probe_current(directory, choice.app, env=declared)
        if error and not choice.qualified and needs_package_app(error, package):
            retry = choose_app(app, package, error)
            if retry.qualified:
                path = _pythonpath(directory, retry, given)
                second = probe_current(directory, retry.app, env={**env, "PYTHONPATH": path})
                if not second:
                    choice, error = retry, ""
                    with _PROBES_GUARD:
                        _QUALIFIED[declared_key] = (time.monotonic(), retry)
        plan = choose_interpreter(replace(facts, app=choice.app, probed=True, probe_error=error))
    if plan.kind == INSTALL:
        install_checkout(directory)
    if choice.qualified:
        logger.info("checkout %s: serving %s, as its Dockerfile does (%s)", directory, choice.app, choice.reason)
    return Launch(plan, choice, _pythonpath(directory, choice, given))
