"""Connect storms (issue 32): N TCP connects at once to each transport, loopback only.

    python bench/connect_storm.py 500 1000

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

import asyncio
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


def _run(args: list[str], n: int) -> str:
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
    late = sum(1 for t in times if t >= 1.0)
    rate = n / wall
    return (
        f"| `{' '.join(args)}` | {n} | {late} | {times[len(times) // 2] * 1000:.0f} ms | {times[-1]:.2f} s | "
        f"{rate:.0f} |"
    )


def main() -> None:
    sizes = [int(arg) for arg in sys.argv[1:]] or [500, 1000]
    print("| server | connects at once | waited >= 1 s (SYN retransmit) | p50 | slowest | connects/s |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        for args in SERVERS:
            print(_run(args, n), flush=True)


if __name__ == "__main__":
    main()
