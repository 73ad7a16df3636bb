"""A program inside ``with Env.from_docker_image(...)`` that waits for a signal (tests/test_faults_docker.py).

    python tests/fault_child.py FLAVOUR IMAGE HANDLER

``FLAVOUR``: ``sync`` or ``aio``; ``HANDLER``: ``handler`` (SIGTERM and SIGHUP
end the ``with`` block: ``sys.exit`` for sync, task cancellation for aio) or
``none`` (the signals' default action kills the interpreter).  Prints one JSON
line with the container's name once the episode started.
"""

from __future__ import annotations

import json
import signal
import sys
import time


def main(flavour: str, image: str, handler: str) -> None:
    if handler != "handler":
        # the default action, whatever was inherited: under nohup (SIGHUP ignored) "no handler" would
        # otherwise mean "ignored", and the signal would never end the program
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
    if flavour == "sync":
        from openenv.sync import Env

        if handler == "handler":
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda *_: sys.exit(0))
        with Env.from_docker_image(image, ready_timeout=60) as env:
            env.reset()
            print(json.dumps({"container": env.provider.name}), flush=True)  # type: ignore[union-attr]
            time.sleep(600)
        return
    import asyncio

    from openenv.aio import Env as AioEnv

    async def run() -> None:
        if handler == "handler":
            task = asyncio.current_task()
            assert task is not None
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, task.cancel)
        async with await AioEnv.from_docker_image(image, ready_timeout=60) as env:
            await env.reset()
            print(json.dumps({"container": env.provider.name}), flush=True)  # type: ignore[union-attr]
            await asyncio.sleep(600)

    try:
        asyncio.run(run())
    except asyncio.CancelledError:
        pass


if __name__ == "__main__":
    main(*sys.argv[1:4])
