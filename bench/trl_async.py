"""Rollouts in flight under TRL's async trainer's calling convention: the aio class on the loop, the sync in threads.

    python bench/trl_async.py            # writes bench/TRL_ASYNC.md (a few minutes)
    python bench/trl_async.py --rounds 3

TRL 1.16's ``_AsyncRolloutLoop`` (``trl/experimental/async_grpo/async_rollout_worker.py``)
keeps N rollouts in flight on one event loop: ``reset(**row)`` through
``loop.run_in_executor`` (a ``ThreadPoolExecutor`` of ``max_inflight_tasks``
threads), each tool awaited on the loop when it is a coroutine function, else
run in the executor, and ``get_reward`` likewise.  Here a rollout is a reset,
two calls of a tool that sleeps 0 or 100 ms on the server, and ``get_reward``
(or the reset alone), against our server in a separate process.  Instances are
reused across batches, as TRL does: a warm-up batch opens each class's sessions, then
each round times one batch of each class, the order alternating (both classes on
one event loop, so the comparison is side by side).  Reported, as the median
[min - max] over the rounds: a batch's wall time, against the ideal (two tool calls
one after another) and against the aio class's batch of the same round; the client's
CPU per call (``time.process_time`` of this process: the server is another); and the
threads each class's sessions added.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import multiprocessing
import os
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


def _spread(values: list[float], fmt: str) -> str:
    """``median [min - max]``, each formatted with ``fmt``."""
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)} - {format(max(values), fmt)}]"


async def measure(
    flavours: dict[str, Any], n: int, ms: int, reset_only: bool, rounds: int, pool: ThreadPoolExecutor
) -> dict[str, dict[str, Any]]:
    """One configuration, every flavour, interleaved: each round times one batch of each (the order alternating).

    Returns per flavour: the batch wall times and client CPU per call of every round, and the threads its
    sessions added (counted after its warm-up batch opened them).
    """
    free: dict[str, list[Any]] = {name: [] for name in flavours}
    out: dict[str, dict[str, Any]] = {name: {"walls": [], "cpus": [], "threads": 0} for name in flavours}
    calls = n * (1 if reset_only else 4)
    for name, cls in flavours.items():  # the sessions open
        before = threading.active_count()
        await batch(cls, free[name], n, ms, pool, reset_only)
        out[name]["threads"] = threading.active_count() - before
    names = list(flavours)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            t, c = time.perf_counter(), time.process_time()
            await batch(flavours[name], free[name], n, ms, pool, reset_only)
            out[name]["walls"].append(time.perf_counter() - t)
            out[name]["cpus"].append(1000 * (time.process_time() - c) / calls)
    for name in names:
        for env in free[name]:
            if name.startswith("openenv.aio"):
                await env.close()
            else:  # blocking: off the loop, as TRL would
                await loop_call(pool, env.close)
    return out


async def loop_call(pool: ThreadPoolExecutor, fn: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(pool, fn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    server = ctx.Process(target=serve, args=(there,), daemon=True)
    server.start()
    url = here.recv()
    load = os.getloadavg()[0]
    lines = [
        "# Rollouts in flight under TRL's async trainer's calling convention",
        "",
        f"`python bench/trl_async.py --rounds {args.rounds}` (Python {sys.version.split()[0]}; "
        f"{time.strftime('%Y-%m-%d')}; load average {load:.1f} at the start). A rollout: reset, 2 tool calls, "
        "get_reward. Both classes on one event loop, as TRL's loop would hold them: each round times one batch "
        "of each, the order alternating (interleaved); every figure is the median [min - max] over the rounds, "
        "and `sync / aio` is the per-round ratio of the two batches' wall times. Threads: what the class's "
        "sessions added to this process (the executor's 128 workers are counted with the first class).",
        "",
        "| class | in flight | tool | wall (s) | wall / ideal | sync / aio (wall) | client CPU per call (ms) "
        "| threads |",
        "|---|---|---|---|---|---|---|---|",
    ]

    async def run() -> None:
        flavours = {
            "openenv.aio (on the loop)": await aio.environment_factory(url),
            "openenv.sync (executor)": await asyncio.to_thread(sync.environment_factory, url),
        }
        try:
            with ThreadPoolExecutor(max_workers=128, thread_name_prefix="grpo-tool") as pool:
                for ms, reset_only in ((0, True), (0, False), (100, False)):
                    for n in (8, 32, 128):
                        out = await measure(flavours, n, ms, reset_only, args.rounds, pool)
                        aio_walls = out["openenv.aio (on the loop)"]["walls"]
                        for name, got in out.items():
                            ideal = 0.0 if reset_only else 2 * ms / 1000
                            walls = got["walls"]
                            ratio = _spread([w / ideal for w in walls], ".2f") if ideal else "-"
                            versus = (
                                _spread([w / a for w, a in zip(walls, aio_walls, strict=True)], ".2f")
                                if walls is not aio_walls
                                else "-"
                            )
                            what = "reset only" if reset_only else f"{ms} ms"
                            line = (
                                f"| {name} | {n} | {what} | {_spread(walls, '.3f')} | {ratio} | {versus} | "
                                f"{_spread(got['cpus'], '.2f')} | {got['threads']} |"
                            )
                            print(line, flush=True)
                            lines.append(line)
        finally:
            await flavours["openenv.aio (on the loop)"].close()
            await asyncio.to_thread(flavours["openenv.sync (executor)"].close)

    try:
        asyncio.run(run())
    finally:
        here.send("stop")
        server.join()
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
