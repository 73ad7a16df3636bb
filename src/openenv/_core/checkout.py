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
"""

from __future__ import annotations

import shlex
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
