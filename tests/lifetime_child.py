"""A program that opens a client with a started server and never closes it (tests of what outlives it).

    python tests/lifetime_child.py FLAVOUR KIND TARGET MODE

``FLAVOUR`` is ``aio`` or ``sync``; ``KIND`` is ``process`` (``TARGET``: a
directory, served with ``python -m openenv serve echo``) or ``docker``
(``TARGET``: an image); ``MODE`` is ``exit`` (return without closing) or
``hang`` (wait to be killed).  It prints one JSON line: the server's PID and
start time, or the container's name, and the reaper's PID.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def describe(env: Any) -> str:
    from openenv._blocking import lifetimes, procfs

    provider = env.provider
    reaper = lifetimes._reaper
    info: dict[str, Any] = {"reaper": reaper.pid if reaper is not None else None}
    child = getattr(provider, "_child", None)
    if child is not None:
        info["pid"] = child.pid
        info["start"] = procfs.process_start_time(child.pid)
    else:
        info["container"] = provider.name
    return json.dumps(info)


def open_sync(kind: str, target: str) -> Any:
    from openenv.sync import Env

    if kind == "docker":
        return Env.from_docker_image(target, ready_timeout=60)
    command = [sys.executable, "-m", "openenv", "serve", "echo", "--port", "{port}"]
    return Env.from_env(target, command=command, ready_timeout=60)


async def open_aio(kind: str, target: str) -> Any:
    from openenv.aio import Env

    if kind == "docker":
        return await Env.from_docker_image(target, ready_timeout=60)
    command = [sys.executable, "-m", "openenv", "serve", "echo", "--port", "{port}"]
    return await Env.from_env(target, command=command, ready_timeout=60)


def main(flavour: str, kind: str, target: str, mode: str) -> None:
    if flavour == "sync":
        env = open_sync(kind, target)
        env.reset()
        print(describe(env), flush=True)
        if mode == "hang":
            time.sleep(600)
        return
    import asyncio

    async def run() -> None:
        env = await open_aio(kind, target)
        await env.reset()
        print(describe(env), flush=True)
        if mode == "hang":
            await asyncio.sleep(600)

    asyncio.run(run())


if __name__ == "__main__":
    main(*sys.argv[1:5])
