"""A pool's steps/s when its Ray servers sit on 1, 2 or 4 nodes of a cluster on this machine (issue 21).

Run in the Ray venv that ``nox -s ray`` makes::

    .nox/ray/bin/python bench/ray_nodes.py [--rounds 7] [--size 8] [--batches 150]

One cluster (``tests/ray_clusters.py``: Ray's ``cluster_utils.Cluster``, a CPU-less
head and 4 nodes on ``127.0.0.2`` ... ``127.0.0.5``, everything on loopback) and three
``openenv.aio.EnvPool`` of ``--size`` echo servers, one ``RayProvider`` actor each
(``host="node"``): the servers of the "1 node" pool all on node 0, those of the "2 nodes"
pool alternating over nodes 0-1, those of "4 nodes" over nodes 0-3 (pinned with each
node's custom resource, so the placement is exact).  All three pools stay open; each
round steps each pool for ``--batches`` batched steps (``pool.step`` of ``--size``
actions), the order rotating every round, after a warm-up.  We report the median
steps/s over rounds and, for 2 and 4 nodes, the ratio against 1 node: the ratio of the
medians and the median and range of the per-round ratios.  Nothing here is asserted.

Every node of this cluster is a raylet on the same machine: the servers of all three
pools share its CPUs, so more nodes add no CPU.  What the figure shows is what placing
a pool's servers on more nodes costs or saves by itself (nothing, within noise, if the
client talks to each server directly, as it does); on a real cluster each node brings
its own CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ray_clusters import RAY_CLUSTER_ENV, LoopbackCluster  # noqa: E402

CONFIGS = {"1 node": 1, "2 nodes": 2, "4 nodes": 4}


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    import ray

    from openenv.aio import EnvPool, RayProvider

    cluster = LoopbackCluster(ray, 4, cpus=1, slots=3 * args.size)  # node0 holds servers of all three
    pools: dict[str, Any] = {}
    try:
        for label, nodes in CONFIGS.items():
            print(f"starting {args.size} servers on {label}", file=sys.stderr, flush=True)

            def factory(index: int, nodes: int = nodes) -> RayProvider:
                node = f"node{index % nodes}"
                return RayProvider("echo", host="node", num_cpus=0, resources={node: 1}, start_timeout=180)

            pools[label] = await EnvPool.from_provider(factory, size=args.size, ready_timeout=180)
            await pools[label].reset()
        actions = [{"message": "hello, benchmark"}] * args.size
        for pool in pools.values():  # warm-up
            for _ in range(args.batches // 3):
                await pool.step(actions)
        rates: dict[str, list[float]] = {label: [] for label in CONFIGS}
        labels = list(CONFIGS)
        for r in range(args.rounds):
            for label in labels[r % 3 :] + labels[: r % 3]:
                pool = pools[label]
                start = time.perf_counter()
                for _ in range(args.batches):
                    await pool.step(actions)
                rates[label].append(args.batches * args.size / (time.perf_counter() - start))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        return rates
    finally:
        for pool in pools.values():
            await pool.close()
        cluster.shutdown()


def report(rates: dict[str, list[float]], args: argparse.Namespace) -> str:
    base = rates["1 node"]
    lines = [
        f"Ray pool over nodes: {args.size} echo servers (one actor each), aio EnvPool, {args.rounds} interleaved "
        f"rounds of {args.batches} batched steps; {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "",
        "| servers on | steps/s (median) | range over rounds | vs 1 node (ratio of medians) "
        "| per-round ratio: median [min-max] |",
        "|---|---|---|---|---|",
    ]
    for label, values in rates.items():
        median = statistics.median(values)
        span = f"{min(values):,.0f}-{max(values):,.0f}"
        if label == "1 node":
            lines.append(f"| {label} | {median:,.0f} | {span} | 1.00 | - |")
            continue
        per_round = [v / b for v, b in zip(values, base, strict=True)]
        lines.append(
            f"| {label} | {median:,.0f} | {span} | {median / statistics.median(base):.2f}x | "
            f"{statistics.median(per_round):.2f}x [{min(per_round):.2f}-{max(per_round):.2f}] |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size", type=int, default=8, help="servers (and sessions) per pool")
    parser.add_argument("--batches", type=int, default=150, help="batched steps per pool per round")
    args = parser.parse_args()
    if "ray" in sys.modules:
        raise SystemExit("ray was imported before its environment was set")
    os.environ.update(RAY_CLUSTER_ENV)
    rates = asyncio.run(run(args))
    print(report(rates, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
