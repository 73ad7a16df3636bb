"""Connect storms (issue 32): N TCP connects at once to each transport, loopback only.

    python bench/connect_storm.py 500 1000 [--rounds 5]

Each server is ``python -m openenv serve echo`` (or ``--asgi``) in its own
process, ``--max-pending 4096`` so that no connect is refused; the client is
one asyncio loop that opens N connections with ``asyncio.gather`` and times
each connect.  A connect whose SYN found the listen queue full waits for the
kernel's SYN retransmit (1 s), so "waited >= 1 s" counts the connects the
backlog did not absorb.  Raw TCP connects only (no WebSocket handshake): it
measures the listen queue, not the handshake.  Bounded: a few seconds per
server, nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

SERVERS = [
    ["--transport", "asyncio", "--backlog", "100"],  # websockets' default, before issue 32
    ["--transport", "asyncio"],
    ["--transport", "threads", "--backlog", "128"],  # socket.create_server's default, before issue 32
    ["--transport", "threads"],
    ["--asgi"],
]


async def _storm(port: int, n: int) -> tuple[list[float], float]:
    async def one() -> tuple[float, asyncio.StreamWriter]:
        started = time.perf_counter()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        return time.perf_counter() - started, writer

    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - started
    for _, writer in results:
        writer.close()
    return sorted(seconds for seconds, _ in results), wall


def _run(args: list[str], n: int) -> dict[str, float]:
    """One storm of ``n`` connects against a fresh server started with ``args``."""
    command = [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--max-pending", "4096", *args]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        times, wall = asyncio.run(_storm(port, n))
    finally:
        proc.terminate()
        proc.wait(15)
        if proc.stderr is not None:
            proc.stderr.close()
    return {
        "late": sum(1 for t in times if t >= 1.0),
        "p50": times[len(times) // 2],
        "slowest": times[-1],
        "rate": n / wall,
    }


def _spread(values: list[float], fmt: str) -> str:
    """``median [min - max]``, each formatted with ``fmt``."""
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)} - {format(max(values), fmt)}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[500, 1000], help="connects at once (500 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each runs every server once, rotated (5)")
    options = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"{options.rounds} interleaved rounds (each round: every server once, the order rotated); "
        f"load average {load:.1f} at the start; median [min - max] over the rounds; "
        "'connects/s vs new default': the per-round ratio to the same transport's new default"
    )
    print()
    print("| server | connects at once | waited >= 1 s | p50 (ms) | slowest (s) | connects/s | vs new default |")
    print("|---|---|---|---|---|---|---|")
    for n in options.sizes:
        runs: dict[int, list[dict[str, float]]] = {i: [] for i in range(len(SERVERS))}
        for round_ in range(options.rounds):
            order = list(range(len(SERVERS)))
            order = order[round_ % len(order) :] + order[: round_ % len(order)]
            for index in order:
                runs[index].append(_run(SERVERS[index], n))
        for index, args in enumerate(SERVERS):
            results = runs[index]
            base = _DEFAULT_OF.get(index)
            if base is None:
                ratio = "-"
            else:
                ratio = _spread([r["rate"] / b["rate"] for r, b in zip(results, runs[base], strict=True)], ".2f") + "x"
            print(
                f"| `{' '.join(args)}` | {n} | {_spread([r['late'] for r in results], '.0f')} | "
                f"{_spread([r['p50'] * 1000 for r in results], '.0f')} | "
                f"{_spread([r['slowest'] for r in results], '.2f')} | {_spread([r['rate'] for r in results], '.0f')} "
                f"| {ratio} |",
                flush=True,
            )


#: the old-backlog rows, compared round by round with their transport's new default
_DEFAULT_OF = {0: 1, 2: 3}


if __name__ == "__main__":
    main()
