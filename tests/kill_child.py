"""A program that starts servers and is SIGKILLed while it does (tests/test_kill_sweep.py).

    python tests/kill_child.py FLAVOUR KIND TARGET [DIE_AT]

``FLAVOUR`` is ``aio`` or ``sync``.  ``KIND`` says what it starts: ``process``
(a `ProcessProvider` serving ``python -m openenv serve echo`` on a socket handed
to it), ``checkout`` (``Env.from_env(TARGET)``, ``TARGET`` a checkout
directory), ``pool`` (``EnvPool.from_env(TARGET, size=2)``), ``docker``
(``Env.from_docker_image(TARGET)``) or ``docker-pool``
(``EnvPool.from_docker_image(TARGET, size=2)``).

It writes ``go`` on its standard output right before the constructor is called
(the moment the killer's clock starts) and ``up`` once it returned, then waits
to be killed.  ``DIE_AT`` makes it SIGKILL itself at one exact point instead:
``spawned`` (the server process exists, nothing registered it yet) or
``mid-write`` (a registry record half written).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

SERVE = [sys.executable, "-m", "openenv", "serve", "echo", "--host", "{host}", "--port", "{port}"]


def _die_at(point: str) -> None:
    from openenv._blocking import process

    def die(*_: Any, **__: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "spawned":
        original = process.start_process

        def start_then_die(*args: Any, **kwargs: Any) -> Any:
            child = original(*args, **kwargs)
            sys.stdout.write(f"server {child.pid}\n")
            sys.stdout.flush()
            die()
            return child

        process.start_process = start_then_die
    elif point == "mid-write":
        original_replace = os.replace

        def replace(source: Any, target: Any, **kwargs: Any) -> None:
            if str(source).endswith(".tmp"):
                die()
            original_replace(source, target, **kwargs)

        os.replace = replace  # type: ignore[assignment]  # the registry writes aside, then renames


def _announce(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def open_sync(kind: str, target: str) -> Any:
    from openenv.sync import Env, EnvPool, ProcessProvider

    if kind == "process":
        return Env.from_provider(ProcessProvider(SERVE), ready_timeout=60)
    if kind == "checkout":
        return Env.from_env(target, command=SERVE, ready_timeout=60)
    if kind == "pool":
        return EnvPool.from_env(target, size=2, command=SERVE, ready_timeout=60)
    if kind == "docker":
        return Env.from_docker_image(target, ready_timeout=60)
    return EnvPool.from_docker_image(target, size=2, ready_timeout=60)


async def open_aio(kind: str, target: str) -> Any:
    from openenv.aio import Env, EnvPool, ProcessProvider

    if kind == "process":
        return await Env.from_provider(ProcessProvider(SERVE), ready_timeout=60)
    if kind == "checkout":
        return await Env.from_env(target, command=SERVE, ready_timeout=60)
    if kind == "pool":
        return await EnvPool.from_env(target, size=2, command=SERVE, ready_timeout=60)
    if kind == "docker":
        return await Env.from_docker_image(target, ready_timeout=60)
    return await EnvPool.from_docker_image(target, size=2, ready_timeout=60)


def main(flavour: str, kind: str, target: str, die_at: str = "") -> None:
    if die_at:
        _die_at(die_at)
    if flavour == "sync":
        import openenv.sync  # noqa: F401  (imported before the clock starts)

        _announce("go")
        open_sync(kind, target)
        _announce("up")
        time.sleep(600)
        return
    import asyncio

    import openenv.aio  # noqa: F401

    async def run() -> None:
        _announce("go")
        await open_aio(kind, target)
        _announce("up")
        await asyncio.sleep(600)

    asyncio.run(run())


if __name__ == "__main__":
    main(*sys.argv[1:5])
