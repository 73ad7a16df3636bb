"""One echo ``step`` frame's CPU in-process, hot and with cold caches (bench/RESULTS.md, server notes).

    .nox/bench/bin/python bench/profile_step.py [--sessions N] [--rounds R] [--frames F]

Times (``time.thread_time_ns``: this thread's CPU, not wall time) our
``Session.handle_async`` on N echo sessions in turn against the asyncio
floor's ``answer()`` (bench/floor_server.py), then each part of our path. Every
measure runs twice: **hot** (the same code back to back, as a micro-benchmark
sees it) and **cold** (8 MiB of memory touched and some unrelated Python run
before each call, as a server's other sessions, websockets and the machine's
other processes leave the caches). Prints the median over rounds and the
range; each figure includes the timer's own cost (printed last). A profiling
aid, not a benchmark: it reaches into private modules.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import floor_server  # noqa: E402 - bench/floor_server.py, beside this file

from openenv.server import _wire  # noqa: E402
from openenv.server.echo import EchoEnvironment  # noqa: E402
from openenv.server.protocol import EnvProtocol  # noqa: E402

STEP = '{"type":"step","data":{"message":"hello, benchmark"}}'
_junk = bytearray(8 << 20)
_clock = time.thread_time_ns


def pollute() -> None:
    """Evict what the caches hold: touch one byte per page of 8 MiB, run some unrelated Python."""
    for i in range(0, len(_junk), 4096):
        _junk[i] = (_junk[i] + 1) & 255
    sorted({str(i): [i, str(i)] for i in range(300)}, key=hash)


def timed(fn: Callable[[int], Any], frames: int, rounds: int, cold: bool) -> list[float]:
    """Per-round mean CPU of ``fn(i)`` in µs."""
    out = []
    for _ in range(rounds):
        total = 0
        for i in range(frames):
            if cold:
                pollute()
            t = _clock()
            fn(i)
            total += _clock() - t
        out.append(total / frames / 1e3)
    return out


def show(name: str, values: list[float]) -> float:
    med = statistics.median(values)
    print(f"  {name:34s} {med:6.1f} µs  [{min(values):.1f} – {max(values):.1f}]")
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=3000)
    args = parser.parse_args()
    n = args.sessions
    protocol = EnvProtocol(EchoEnvironment, max_sessions=n)
    sessions = [s for s, _ in (protocol.open_session() for _ in range(n)) if s is not None]
    states = [{"n": 0} for _ in range(n)]
    loop = asyncio.new_event_loop()
    for s in sessions:
        loop.run_until_complete(s.handle_async('{"type":"reset","data":{}}'))

    def ours(i: int) -> None:
        # handle_async of the echo never suspends: one send() runs the whole frame
        coro = sessions[i % n].handle_async(STEP)
        try:
            coro.send(None)
        except StopIteration:
            return
        raise RuntimeError("handle_async suspended")

    env = sessions[0].env
    data = json.loads(STEP)["data"]
    action = env.action_type.model_validate(data)
    observation = env.step(action)
    msg = json.loads(STEP)
    session = sessions[0]
    parts: dict[str, Callable[[int], Any]] = {
        "json.loads": lambda i: json.loads(STEP),
        "_step_action (checks + validate)": lambda i: session._step_action(msg),
        "action model_validate": lambda i: env.action_type.model_validate(data),
        "the echo's own step": lambda i: env.step(action),
        "step_result (dump + reshape)": lambda i: _wire.step_result(observation),
        "observation_frame": lambda i: _wire.observation_frame(observation),
    }
    try:
        for cold in (False, True):
            print("cold caches" if cold else "hot")
            a = show("ours: Session.handle_async", timed(ours, args.frames, args.rounds, cold))
            b = show(
                "floor: answer()",
                timed(lambda i: floor_server.answer(STEP, states[i % n]), args.frames, args.rounds, cold),
            )
            print(f"  ours - floor {a - b:.1f} µs, ours / floor {a / b:.2f}×")
            for name, fn in parts.items():
                show(f"  {name}", timed(fn, args.frames // 2, args.rounds, cold))
        t = _clock()
        for _ in range(10000):
            _clock()
        print(f"timer cost {(_clock() - t) / 10000 / 1e3:.2f} µs per reading")
    finally:
        for s in sessions:
            protocol.end_session(s)
        loop.close()


if __name__ == "__main__":
    main()
