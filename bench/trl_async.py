"""Rollouts in flight under TRL's async trainer's calling convention: the aio class on the loop, the sync in threads.

    python bench/trl_async.py            # writes bench/TRL_ASYNC.md (about a minute)
    python bench/trl_async.py --rounds 3

TRL 1.16's ``_AsyncRolloutLoop`` (``trl/experimental/async_grpo/async_rollout_worker.py``)
keeps N rollouts in flight on one event loop: ``reset(**row)`` through
``loop.run_in_executor`` (a ``ThreadPoolExecutor`` of ``max_inflight_tasks``
threads), each tool awaited on the loop when it is a coroutine function, else
run in the executor, and ``get_reward`` likewise.  Here a rollout is a reset,
two calls of a tool that sleeps 0 or 100 ms on the server, and ``get_reward``
(or the reset alone), against our server in a separate process.  Instances are
reused across batches, as TRL does: a warm-up batch opens the sessions, then
each round times one batch.  Reported: the median wall time of a batch against
the ideal (two tool calls one after another), the client's CPU per call
(``time.process_time`` of this process: the server is another), and this
process's threads while the sessions are open.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import multiprocessing
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openenv.aio as aio
import openenv.sync as sync
from openenv._core.models import Action, Observation, State
from openenv.server import Environment, EnvServer, tool

OUT = Path(__file__).resolve().parent / "TRL_ASYNC.md"


class SlowTool(Environment[Action, Observation, State]):
    """One MCP tool, ``wait(ms)``, that sleeps on the server."""

    action_type = Action
    observation_type = Observation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        return Observation(metadata={"message": "Call wait(ms)."})

    def step(self, action: Action) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return self._state

    @tool
    def wait(self, ms: int) -> str:
        """Sleep ``ms`` milliseconds."""
        time.sleep(ms / 1000)
        return "ok"


def serve(conn: Any) -> None:
    with EnvServer(SlowTool, host="127.0.0.1", port=0, max_sessions=300) as server:
        conn.send(server.url)
        conn.recv()


async def batch(cls: Any, free: list[Any], n: int, ms: int, pool: ThreadPoolExecutor, reset_only: bool) -> None:
    loop = asyncio.get_running_loop()

    async def call(fn: Any, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(**kwargs)
        return await loop.run_in_executor(pool, functools.partial(fn, **kwargs))

    async def rollout() -> None:
        env = free.pop() if free else cls()
        await loop.run_in_executor(pool, functools.partial(env.reset, seed=1))
        if not reset_only:
            await call(env.wait, ms=ms)
            await call(env.wait, ms=ms)
            await call(env.get_reward)
        free.append(env)

    await asyncio.gather(*(rollout() for _ in range(n)))


def measure(cls: Any, n: int, ms: int, reset_only: bool, rounds: int) -> tuple[float, float, int]:
    async def main() -> tuple[float, float, int]:
        free: list[Any] = []
        with ThreadPoolExecutor(max_workers=128, thread_name_prefix="grpo-tool") as pool:
            await batch(cls, free, n, ms, pool, reset_only)  # the sessions open
            walls, cpu = [], 0.0
            for _ in range(rounds):
                t, c = time.perf_counter(), time.process_time()
                await batch(cls, free, n, ms, pool, reset_only)
                walls.append(time.perf_counter() - t)
                cpu += time.process_time() - c
            threads = threading.active_count()
            for env in free:
                closing = env.close()
                if inspect.isawaitable(closing):
                    await closing
        calls = rounds * n * (1 if reset_only else 4)
        return statistics.median(walls), 1000 * cpu / calls, threads

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    server = ctx.Process(target=serve, args=(there,), daemon=True)
    server.start()
    url = here.recv()
    lines = [
        "# Rollouts in flight under TRL's async trainer's calling convention",
        "",
        f"`python bench/trl_async.py` (median of {args.rounds} batches; Python {sys.version.split()[0]}; "
        f"{time.strftime('%Y-%m-%d')}). A rollout: reset, 2 tool calls, get_reward. Threads: this process's "
        "(the executor's 128 included) while the sessions are open.",
        "",
        "| class | in flight | tool | wall (s) | ideal (s) | wall / ideal | client CPU per call (ms) | threads |",
        "|---|---|---|---|---|---|---|---|",
    ]
    try:
        flavours = {"openenv.aio (on the loop)": asyncio.run(aio.environment_factory(url))}
        flavours["openenv.sync (executor)"] = sync.environment_factory(url)
        for ms, reset_only in ((0, True), (0, False), (100, False)):
            for n in (8, 32, 128):
                for name, cls in flavours.items():
                    wall, cpu, threads = measure(cls, n, ms, reset_only, args.rounds)
                    ideal = 0.0 if reset_only else 2 * ms / 1000
                    ratio = f"{wall / ideal:.2f}" if ideal else "-"
                    what = "reset only" if reset_only else f"{ms} ms"
                    line = f"| {name} | {n} | {what} | {wall:.3f} | {ideal:.1f} | {ratio} | {cpu:.2f} | {threads} |"
                    print(line, flush=True)
                    lines.append(line)
        asyncio.run(flavours["openenv.aio (on the loop)"].close())
        flavours["openenv.sync (executor)"].close()
    finally:
        here.send("stop")
        server.join()
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
