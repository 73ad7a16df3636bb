"""Where ``EnvPool.from_docker_image(image, size=N)`` spends its time (bench/RESULTS.md, boot).

    .nox/bench/bin/python bench/profile_boot.py [N]          # our bootstrap: a timeline per phase
    .nox/bench/bin/python bench/profile_boot.py [N] --engine # Docker alone: N x create + start, `sleep 30`

The first form wraps docker-py's ``create_container``/``start``/``inspect_container``
and our ``_blocking.docker`` steps and ``wait_until_ready`` with timers, boots 1
and N containers twice each (after a warm-up), and prints, per phase, when the
first call began, when the last ended and the summed time, plus the host's CPU
time (``/proc/stat``, all cores) from the call until every session was reset.
The second form measures the engine's own floor: N threads, each with its own
docker-py client, create and start the image with ``sleep 30`` as the command
(no Python server), with its port published as our provider does.
A profiling aid, not a benchmark: it reaches into private modules.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import Any

IMAGE = "openenv-test/echo:latest"
_events: list[tuple[str, float, float]] = []
_events_lock = threading.Lock()
_t0 = 0.0


def host_cpu() -> float:
    """CPU seconds the whole host has spent busy (all cores), from /proc/stat."""
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _timed(label: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            with _events_lock:
                _events.append((label, start - _t0, time.perf_counter() - _t0))

    return wrapper


def instrument() -> None:
    import docker.api.container as dac

    from openenv._blocking import docker as _docker
    from openenv._sync import providers as _providers

    for name in ("connect_client", "pull_if_missing", "start_container"):
        setattr(_docker, name, _timed(name, getattr(_docker, name)))
    _providers.ServerProvider.wait_until_ready = _timed("wait_until_ready", _providers.ServerProvider.wait_until_ready)
    for meth in ("create_container", "start", "inspect_container"):
        setattr(dac.ContainerApiMixin, meth, _timed(f"api.{meth}", getattr(dac.ContainerApiMixin, meth)))


def boot(n: int) -> None:
    global _t0
    from openenv.sync import Env, EnvPool

    _events.clear()
    _t0 = time.perf_counter()
    c0 = host_cpu()
    if n == 1:
        env = Env.from_docker_image(IMAGE)
        env.reset()
        ready, cpu = time.perf_counter() - _t0, host_cpu() - c0
        env.close()
    else:
        pool = EnvPool.from_docker_image(IMAGE, size=n)
        pool.__enter__()
        pool.reset()
        ready, cpu = time.perf_counter() - _t0, host_cpu() - c0
        pool.close()
    cores = os.cpu_count() or 1
    print(f"n={n}: ready {ready:.3f} s, host CPU until ready {cpu:.2f} s (of {cores * ready:.2f} s on {cores} CPUs)")
    phases: dict[str, list[float]] = {}
    for label, start, end in _events:
        if start > ready:
            continue
        p = phases.setdefault(label, [1e9, 0.0, 0.0, 0])
        p[0], p[1], p[2], p[3] = min(p[0], start), max(p[1], end), p[2] + end - start, p[3] + 1
    for label, (first, last, total, count) in phases.items():
        print(f"   {label:22s} x{count:3d}  first began {first:.3f}  last ended {last:.3f}  sum {total:.3f} s")


def engine(n: int) -> None:
    import docker

    clients = [docker.from_env() for _ in range(n)]
    done: list[Any] = [None] * n

    def one(i: int) -> None:
        c = clients[i].containers.create(
            IMAGE,
            ["30"],
            entrypoint=["sleep"],
            ports={"8000/tcp": ("127.0.0.1", None)},
            labels={"org.openenv.bench-profile": "1"},
            detach=True,
        )
        t = time.perf_counter()
        c.start()
        done[i] = (c, time.perf_counter() - t)

    c0, t0 = host_cpu(), time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, host_cpu() - c0
    for c, _ in done:
        c.remove(force=True)
    for cl in clients:
        cl.close()
    starts = sorted(d[1] for d in done)
    print(
        f"engine n={n}: all created + started {wall:.3f} s, each start {starts[0]:.3f}-{starts[-1]:.3f} s, "
        f"host CPU {cpu:.2f} s"
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 8
    run = engine if "--engine" in sys.argv else boot
    if run is boot:
        instrument()
    run(1)  # warm-up
    for size in (1, n, 1, n):
        run(size)


if __name__ == "__main__":
    main()
