"""The client's own CPU per ``step`` against raw websockets, in one process (issue 30, item 7).

    .nox/bench/bin/python bench/profile_client.py [--rounds R] [--steps N] [--profile aio|sync]
    PYTHONPATH=/tmp/base/src .nox/bench/bin/python bench/profile_client.py   # another tree's client

A profiling aid beside ``nox -s bench`` (not a benchmark: it reaches into ``Env._ws``). It starts
``python -m openenv serve echo`` and prints, per flavour, the median over R rounds of:

* **real**: ``time.process_time()`` per step of ``Env.step`` and of the raw floor (the bench's
  ``raw-sync``/``raw-async`` exchange), on one connection each, both in this process, one round
  of each after the other; the ratio is the median of the per-round ratios. Both share one
  process, interpreter state and server, so a change of a few microseconds shows, where the
  bench's fresh worker processes vary by more than that from run to run.
* **raw+timeout**: the floor with our per-message timeout (``recv(timeout=60)``; on the async side
  our watchdog, ``ws_recv``) against the floor: what the timeout alone costs.
* **main thread** (sync): the calling thread's CPU alone (``time.thread_time``); the rest is the
  connection's reader thread.
* **no network**: the same, with ``Env``'s socket swapped for one that answers at once (so only
  the client's Python is timed): ``overhead`` is ours minus raw, per step.

To compare two trees, run it alternately with and without ``PYTHONPATH`` pointing at the other
tree's ``src`` (``git archive HEAD~1 src | tar -x -C /tmp/base``). ``--profile`` prints cProfile's
top functions of one flavour's no-network loop.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import re
import statistics
import subprocess
import sys
import time
from typing import Any

import websockets.asyncio.client as ws_async
import websockets.sync.client as ws_sync

ACTION = {"message": "hello, benchmark"}
RAW = {
    "compression": None,
    "max_size": 100 << 20,
    "ping_interval": 20,
    "ping_timeout": 20,
    "open_timeout": 10,
    "close_timeout": 5,
    "proxy": None,
}
REPLY = json.dumps(
    {
        "type": "observation",
        "data": {
            "observation": {"echoed_message": "hello, benchmark", "message_length": 16, "metadata": {}},
            "reward": 1.6,
            "done": False,
        },
    }
)
_cpu = time.process_time


def start_server() -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--max-sessions", "8"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if found:
            return proc, f"http://127.0.0.1:{found.group(1)}"
    raise SystemExit("the echo server printed no URL")


def _reply(raw: Any) -> Any:
    message = json.loads(raw)
    assert message["type"] == "observation"
    return message["data"]["observation"]


class Instant:
    """A socket that answers every frame at once (the attributes ``ws_pending`` reads are absent)."""

    def __init__(self) -> None:
        self.sent = ""

    async def send(self, frame: str) -> None:
        self.sent = frame

    async def recv(self, timeout: float | None = None) -> str:
        return REPLY


class InstantSync(Instant):
    def send(self, frame: str) -> None:  # type: ignore[override]
        self.sent = frame

    def recv(self, timeout: float | None = None) -> str:  # type: ignore[override]
        return REPLY


def _per_step(seconds: float, n: int) -> float:
    return seconds / n * 1e6


async def aio_rounds(url: str, rounds: int, n: int, profile: bool) -> dict[str, list[tuple[float, float]]]:
    from openenv.aio import Env

    env = Env(url)
    await env.connect()
    await env.reset()
    raw = await ws_async.connect(url.replace("http", "ws", 1) + "/ws", **RAW)
    await raw.send('{"type":"reset","data":{}}')
    await raw.recv()

    async def raw_step(ws: Any) -> Any:
        await ws.send(json.dumps({"type": "step", "data": ACTION}))
        return _reply(await ws.recv())

    from openenv._shim_async import ws_recv

    async def raw_step_timeout(ws: Any) -> Any:  # the floor with our per-message timeout (its watchdog)
        await ws.send(json.dumps({"type": "step", "data": ACTION}))
        return _reply(await ws_recv(ws, 60.0))

    async def timed(call: Any, arg: Any) -> float:
        c = _cpu()
        for _ in range(n):
            await call(arg)
        return _per_step(_cpu() - c, n)

    out: dict[str, list[tuple[float, float]]] = {"real": [], "raw+timeout": [], "no network": []}
    for _ in range(200):
        await env.step(ACTION)
        await raw_step(raw)
    for _ in range(rounds):
        ours, floor = await timed(env.step, ACTION), await timed(raw_step, raw)
        out["real"].append((ours, floor))
        out["raw+timeout"].append((await timed(raw_step_timeout, raw), floor))
    real_ws, instant = env._ws, Instant()
    env._ws = instant  # type: ignore[assignment]
    try:
        for _ in range(rounds):
            out["no network"].append((await timed(env.step, ACTION), await timed(raw_step, instant)))
        if profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                await env.step(ACTION)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    finally:
        env._ws = real_ws
    await env.close()
    await raw.close()
    return out


def sync_rounds(url: str, rounds: int, n: int, profile: bool) -> dict[str, list[tuple[float, float]]]:
    from openenv.sync import Env

    env = Env(url)
    env.connect()
    env.reset()
    raw = ws_sync.connect(url.replace("http", "ws", 1) + "/ws", **RAW).__enter__()
    raw.send('{"type":"reset","data":{}}')
    raw.recv()

    def raw_step(ws: Any) -> Any:
        ws.send(json.dumps({"type": "step", "data": ACTION}))
        return _reply(ws.recv())

    def raw_step_timeout(ws: Any) -> Any:  # the floor with our per-message timeout
        ws.send(json.dumps({"type": "step", "data": ACTION}))
        return _reply(ws.recv(timeout=60.0))

    main_cpu: dict[Any, float] = {}

    def timed(call: Any, arg: Any) -> float:
        c, m = _cpu(), time.thread_time()
        for _ in range(n):
            call(arg)
        main_cpu[call] = _per_step(time.thread_time() - m, n)  # this thread's share (the rest: the reader's)
        return _per_step(_cpu() - c, n)

    out: dict[str, list[tuple[float, float]]] = {"real": [], "main thread": [], "raw+timeout": [], "no network": []}
    for _ in range(200):
        env.step(ACTION)
        raw_step(raw)
    for _ in range(rounds):
        ours, floor = timed(env.step, ACTION), timed(raw_step, raw)
        out["real"].append((ours, floor))
        out["main thread"].append((main_cpu[env.step], main_cpu[raw_step]))
        out["raw+timeout"].append((timed(raw_step_timeout, raw), floor))
    real_ws, instant = env._ws, InstantSync()
    env._ws = instant  # type: ignore[assignment]
    try:
        for _ in range(rounds):
            out["no network"].append((timed(env.step, ACTION), timed(raw_step, instant)))
        if profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                env.step(ACTION)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    finally:
        env._ws = real_ws
    env.close()
    raw.close()
    return out


def report(flavour: str, out: dict[str, list[tuple[float, float]]]) -> None:
    for what, pairs in out.items():
        ours = statistics.median(a for a, _ in pairs)
        floor = statistics.median(b for _, b in pairs)
        ratios = [a / b for a, b in pairs]
        print(
            f"{flavour:4s} {what:10s}: ours {ours:6.1f} µs, raw {floor:6.1f} µs per step; "
            f"ratio {statistics.median(ratios):.3f} [{min(ratios):.2f} – {max(ratios):.2f}], "
            f"overhead {statistics.median(a - b for a, b in pairs):5.1f} µs"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=1000, help="steps per contender per round")
    parser.add_argument("--profile", choices=["aio", "sync"], default=None)
    args = parser.parse_args()
    import openenv

    print(f"openenv from {list(openenv.__path__)[0]}")
    proc, url = start_server()
    try:
        report("aio", asyncio.run(aio_rounds(url, args.rounds, args.steps, args.profile == "aio")))
        report("sync", sync_rounds(url, args.rounds, args.steps, args.profile == "sync"))
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
