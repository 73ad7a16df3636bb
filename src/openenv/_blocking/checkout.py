"""The IO behind running a local environment checkout: gather facts, probe, install.

The decision itself is `openenv._core.checkout.choose_interpreter()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import replace

from .._core.checkout import INSTALL, PROBE, CheckoutFacts, Plan, choose_interpreter, venv_python_path
from .._core.errors import ProviderError

__all__ = ["gather_facts", "probe_current", "install_checkout", "choose_plan"]

#: Seconds the current interpreter gets to import uvicorn and the app.
PROBE_TIMEOUT = 60.0
#: Seconds ``install=True`` gets to create the venv and pip-install the checkout.
INSTALL_TIMEOUT = 1800.0

_PROBE = (
    "import sys, importlib\nsys.path.insert(0, sys.argv[1])\nimport uvicorn\nimportlib.import_module(sys.argv[2])\n"
)


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
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def probe_current(directory: str, app: str, timeout: float = PROBE_TIMEOUT) -> str:
    """Whether this interpreter can import ``uvicorn`` and ``app``'s module with ``directory`` on ``sys.path``.

    Runs in a subprocess (importing the app may have side effects).  Returns
    ``""`` on success, else the last line of the error.
    """
    module = app.partition(":")[0]
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, directory, module],
            cwd=directory,
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


def choose_plan(directory: str, app: str, *, install: bool = False) -> Plan:
    """Gather the facts, probe the current interpreter if it comes to that, install if asked.

    Raises:
        CheckoutNotRunnable: nothing can run the checkout.
        ProviderError: ``install=True`` failed.
    """
    facts = gather_facts(directory, app, install=install)
    plan = choose_interpreter(facts)
    if plan.kind == PROBE:
        plan = choose_interpreter(replace(facts, probed=True, probe_error=probe_current(directory, app)))
    if plan.kind == INSTALL:
        install_checkout(directory)
    return plan
