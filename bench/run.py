"""Benchmarks of openenv's clients against raw floors and the released client (issue #5).

Run with ``nox -s bench`` (it makes the venvs); directly:
``python bench/run.py --released-python PATH [--only step,large,setup,concurrent,import,docker,pool,boot,server]``.

Every contender is a separate worker process (``bench/worker.py``) against one
server process per workload, so each client's CPU time is its own. Contenders
run interleaved round-robin (the order rotates every round) after a warm-up.
Results go to ``bench/results/`` (JSON, Markdown, PNG) and the Markdown table
to ``bench/RESULTS.md``. Nothing here asserts a wall-clock bound: the targets
are ratios of medians measured side by side in the same run, reported as met
or missed. See bench/README.md for exactly what each contender does.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "worker.py"
ECHO_IMAGE = "openenv-test/echo:latest"
SECTIONS = ["step", "large", "setup", "concurrent", "import", "docker", "pool", "boot", "server"]
BLOB = 1 << 20
MESSAGE = "hello, benchmark"
# the pool section's latency-bound variant: bench.envs:SleepEnvironment sleeps this long in every step
SLEEP_MS = 5
# pool variants: result-key prefix, server spec, server env, heading
POOL_VARIANTS = {
    "pool": ("echo", {}, "echo (client + server overhead ceiling)"),
    "pool-sleep": (
        "bench.envs:SleepEnvironment",
        {"BENCH_SLEEP_MS": str(SLEEP_MS)},
        f"{SLEEP_MS} ms sleep per step (concurrency)",
    ),
}

SYNC_KINDS = ["ours-sync", "raw-sync", "rel-plain", "rel-dotsync"]
ASYNC_KINDS = ["ours-aio", "raw-async", "rel-await"]
LABELS = {
    "ours-sync": "openenv.sync.Env",
    "ours-aio": "openenv.aio.Env",
    "raw-sync": "raw websockets.sync (floor)",
    "raw-async": "raw websockets.asyncio (floor)",
    "rel-await": "openenv 0.10.0, awaited",
    "rel-plain": "openenv 0.10.0, plain sync calls",
    "rel-dotsync": "openenv 0.10.0, .sync()",
    "floor-docker": "docker-py + raw websockets (floor)",
}
# the pool section: the same workers, driving N sessions per batch
POOL_KINDS = ["ours-pool", "ours-sync", "ours-aio", "rel-dotsync"]
POOL_LABELS = {
    "ours-pool": "sync-pool: `openenv.sync.EnvPool`, `pool.step(actions)`",
    "ours-sync": "sync-seq: N `openenv.sync.Env`, stepped one after another",
    "ours-aio": "aio-gather: N `openenv.aio.Env`, `asyncio.gather`",
    "rel-dotsync": "released-threads: N 0.10.0 `.sync()` clients on a ThreadPoolExecutor(N)",
}
BOOT_LABELS = {
    "ours-pool": "`openenv.sync.EnvPool.from_docker_image(image, size={size})`",
    "ours-sync": "`openenv.sync.Env.from_docker_image(image)` (1 container)",
    "rel-await": "0.10.0 `GenericEnvClient.from_docker_image(image)` (1 container)",
}
#: the server section's servers: label, and how each is started (see bench/README.md)
SERVER_LABELS = {
    "srv-aio": "ours, asyncio transport, echo on the loop (`serve echo`)",
    "srv-aio-blk": "ours, asyncio transport, blocking echo (worker thread per session)",
    "srv-thr": "ours, threading transport, echo (`serve echo --transport threads`)",
    "srv-asgi": "ours, ASGI app + uvicorn, echo on the loop",
    "srv-asgi-blk": "ours, ASGI app + uvicorn, blocking echo (worker thread per session)",
    "srv-asgi-serve": "ours, ASGI app + uvicorn as `serve --asgi` runs it (`uvicorn_config()`), echo on the loop",
    "srv-rel": "0.10.0, sync env (worker thread per session)",
    "srv-rel-async": "0.10.0, async env (`step_async` awaited on the loop)",
    "floor-aio": "raw websockets asyncio echo (floor)",
    "floor-thr": "raw websockets threading echo (floor)",
    "floor-uvicorn": "bare ASGI echo app on uvicorn (the floor of any ASGI app)",
}
#: with ``--baseline-src``: our asyncio transport from another tree's ``src`` (an A/B of a change)
BASELINE_LABELS = {
    "base-aio": "baseline tree (`--baseline-src`), asyncio transport, echo on the loop",
    "base-aio-blk": "baseline tree (`--baseline-src`), asyncio transport, blocking echo",
    "base-asgi": "baseline tree (`--baseline-src`), ASGI app + uvicorn, echo on the loop",
}
SERVER_SIZES = (8, 32, 128, 512)
#: steps per server per block (a block is max(3, this // sessions) batches)
SERVER_STEPS = 2000
CHART_LABELS = {
    "pool:ours-pool": "sync-pool",
    "pool:ours-sync": "sync-seq",
    "pool:ours-aio": "aio-gather",
    "pool:rel-dotsync": "released-threads",
    "boot:ours-pool": "EnvPool of 8",
    "boot:ours-sync": "Env (1)",
    "boot:rel-await": "0.10.0 (1)",
    **{k: k for k in (*SERVER_LABELS, *BASELINE_LABELS)},
}
IMPORT_LABELS = {
    "imp:ours-sync": "import openenv.sync",
    "imp:ours-aio": "import openenv.aio",
    "imp:floor-sync": "websockets.sync.client+httpx+pydantic (floor)",
    "imp:floor-async": "websockets.asyncio.client+httpx+pydantic",
    "imp:rel": "openenv 0.10.0: from openenv import GenericEnvClient",
}


def log(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------


class Server:
    """``python -m openenv serve SPEC`` in its own process, on 127.0.0.1 and an ephemeral port."""

    def __init__(
        self,
        spec: str,
        max_sessions: int,
        env: dict[str, str] | None = None,
        released: str | None = None,
        extra: Sequence[str] = (),
        script: str | None = None,
    ) -> None:
        self.spec = spec
        if released:
            # the released FastAPI server (bench/released_server.py) in the released venv, run from a
            # scratch cwd and without PYTHONPATH: nothing named openenv/ may shadow the venv's package
            penv = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENENV_MODE")}
            penv.update(env or {})
            cmd = [released, str(HERE / "released_server.py"), "--max-sessions", str(max_sessions), *extra]
            cwd = tempfile.gettempdir()
        elif script:  # bench/asgi_server.py, bench/floor_server.py
            penv = dict(os.environ, PYTHONPATH=str(ROOT))
            penv.update(env or {})  # a baseline tree's src first
            cmd = [sys.executable, str(HERE / script), *extra, "--max-sessions", str(max_sessions)]
            cwd = str(ROOT)
        else:
            penv = dict(os.environ, PYTHONPATH=str(ROOT))
            penv.update(env or {})  # may replace PYTHONPATH (--baseline-src)
            cmd = [
                sys.executable,
                "-m",
                "openenv",
                "serve",
                spec,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--max-sessions",
                str(max_sessions),
                *extra,
            ]
            cwd = str(ROOT)
        self.proc = subprocess.Popen(
            cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=penv, cwd=cwd
        )
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        self.url = ""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            if line.startswith("serving ") and " on " in line:
                self.url = line.rsplit(" on ", 1)[1].strip()
                break
        if not self.url:
            self.proc.kill()
            raise RuntimeError(f"server {spec} did not start")
        self._drain = threading.Thread(target=self.proc.stderr.read, daemon=True)
        self._drain.start()

    def cpu(self) -> float:
        """The server process's CPU time so far (user + system, all threads), in seconds."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status(self) -> tuple[float, int]:
        """(resident memory in MiB, threads) of the server process now."""
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines() if ":" in line
        )
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Worker:
    """One contender process speaking JSON lines (see bench/worker.py)."""

    def __init__(self, kind: str, python: str, logdir: Path, name: str | None = None) -> None:
        self.kind = kind
        self.errlog = open(logdir / f"worker-{name or kind}.log", "w")
        # a scratch cwd: nothing named openenv/ may shadow the venv's package
        self.proc = subprocess.Popen(
            [python, "-u", str(WORKER), kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        hello = self._read()
        self.pid = hello["pid"]
        self.websockets = hello["websockets"]

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.kind} died (see {self.errlog.name})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"worker {self.kind}: {reply['error']}\n{reply.get('trace', '')}")
        return reply

    def call(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def quit(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write('{"op":"quit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(15)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.errlog.close()


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per contender: median over rounds of each round's p50, pooled p99, CPU per op, ops/s."""
    p50s, cpus, rates, pooled = [], [], [], []
    for r in rounds:
        lat = [x / 1e9 for x in r["lat"]]
        pooled.extend(lat)
        p50s.append(pct(lat, 0.5))
        cpus.append(r["cpu"] / len(lat))
        rates.append(len(lat) / r["wall"])
    switches = {}
    if rounds and "switches" in rounds[0]:  # the step sections: how often a wait blocked, per operation
        switches = {"switches": statistics.median(r["switches"] / len(r["lat"]) for r in rounds)}
    return {
        **switches,
        "p50": statistics.median(p50s),
        "p50_min": min(p50s),
        "p50_max": max(p50s),
        "p99": pct(pooled, 0.99),
        "cpu": statistics.median(cpus),
        "rate": statistics.median(rates),
        "n": len(pooled),
        "rounds": len(rounds),
        "by_round": {"p50": p50s, "cpu": cpus, "rate": rates},
    }


# ---------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------


def rotated(items: list[str], r: int) -> list[str]:
    k = r % len(items)
    return items[k:] + items[:k]


def run_rounds(kinds: list[str], rounds: int, once: Callable[[str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for r in range(rounds):
        for kind in rotated(kinds, r):
            out[kind].append(once(kind))
        log(f"    round {r + 1}/{rounds} done")
    return out


def section_steps(workers: dict[str, Worker], url: str, n: int, rounds: int, warmup: int, blob: int) -> dict[str, Any]:
    kinds = list(workers)
    for kind in kinds:
        workers[kind].call(op="open", url=url, message=MESSAGE, warmup=warmup, blob=blob)
    try:
        raw = run_rounds(kinds, rounds, lambda k: workers[k].call(op="steps", n=n))
    finally:
        for kind in kinds:
            workers[kind].call(op="close")
    return {k: summarize(v) for k, v in raw.items()}


def section_setup(workers: dict[str, Worker], url: str, n: int, rounds: int) -> dict[str, Any]:
    kinds = list(workers)
    for kind in kinds:  # warm-up
        workers[kind].call(op="setup", url=url, n=max(3, n // 5))
    raw = run_rounds(kinds, rounds, lambda k: workers[k].call(op="setup", url=url, n=n))
    return {k: summarize(v) for k, v in raw.items()}


def section_concurrent(workers: dict[str, Worker], url: str, sessions: int, steps: int, rounds: int) -> dict[str, Any]:
    kinds = list(workers)
    for kind in kinds:  # warm-up
        workers[kind].call(op="conc", url=url, sessions=sessions, steps=3, message=MESSAGE)
    raw = run_rounds(
        kinds, rounds, lambda k: workers[k].call(op="conc", url=url, sessions=sessions, steps=steps, message=MESSAGE)
    )
    return {k: summarize(v) for k, v in raw.items()}


def server_timed(worker: Worker, server: Server, n: int) -> dict[str, Any]:
    """One block of n batches, with the server's CPU time over it."""
    c0 = server.cpu()
    r = worker.call(op="batches", n=n)
    r["server_cpu"] = server.cpu() - c0
    return r


def batch_summary(rs: list[dict[str, Any]], size: int) -> dict[str, Any]:
    s = summarize(rs)
    s["steps_rate"] = s["rate"] * size
    s["cpu_step"] = s["cpu"] / size
    # /proc counts CPU in clock ticks (10 ms): summed over all rounds, not a median of per-block values
    cpu = sum(r["server_cpu"] for r in rs)
    s["server_cpu_step"] = cpu / sum(len(r["lat"]) * size for r in rs)
    s["server_busy"] = cpu / sum(r["wall"] for r in rs)
    return s


def section_pool(
    workers: dict[str, Worker], server: Server, size: int, n: int, rounds: int, warmup: int
) -> dict[str, Any]:
    """N sessions per contender, all open for the whole section; a block is n batches."""
    kinds = list(workers)
    try:
        for kind in kinds:
            workers[kind].call(op="mopen", url=server.url, size=size, message=MESSAGE, warmup=warmup)
        raw = run_rounds(kinds, rounds, lambda k: server_timed(workers[k], server, n))
    finally:
        for kind in kinds:
            workers[kind].call(op="mclose")
    return {k: batch_summary(v, size) for k, v in raw.items()}


def section_server(
    workers: dict[str, Worker], servers: dict[str, Server], size: int, n: int, rounds: int
) -> dict[str, Any]:
    """One client worker per server (the same kind), N sessions each; server CPU read from /proc."""
    kinds = list(servers)
    idle = {k: servers[k].status() for k in kinds}
    status: dict[str, tuple[float, int]] = {}
    try:
        for kind in kinds:
            workers[kind].call(op="mopen", url=servers[kind].url, size=size, message=MESSAGE, warmup=3)
        raw = run_rounds(kinds, rounds, lambda k: server_timed(workers[k], servers[k], n))
        status = {k: servers[k].status() for k in kinds}  # with every session still open
    finally:
        for kind in kinds:
            workers[kind].call(op="mclose")
    out = {k: batch_summary(v, size) for k, v in raw.items()}
    for k in kinds:
        out[k]["rss_mib"], out[k]["threads"] = status.get(k, (float("nan"), 0))
        out[k]["rss_idle_mib"], out[k]["threads_idle"] = idle[k]
    return out


def start_server(kind: str, released: str, cap: int, baseline: str | None = None) -> Server:
    """One server of the server section (each in its own process); ``baseline``: a ``src`` for ``base-*``."""
    blocking = "bench.envs:BlockingEchoEnvironment"
    if kind in BASELINE_LABELS:
        if baseline is None:
            raise ValueError(f"{kind} needs --baseline-src")
        env = {"PYTHONPATH": os.pathsep.join([baseline, str(ROOT)])}  # that tree's openenv first
        if kind == "base-asgi":
            return Server("echo", cap, script="asgi_server.py", extra=["echo"], env=env)
        return Server("echo" if kind == "base-aio" else blocking, cap, extra=["--transport", "asyncio"], env=env)
    if kind == "srv-aio":
        return Server("echo", cap, extra=["--transport", "asyncio"])
    if kind == "srv-aio-blk":
        return Server(blocking, cap, extra=["--transport", "asyncio"])
    if kind == "srv-thr":
        return Server("echo", cap, extra=["--transport", "threads"])
    if kind == "srv-asgi":
        return Server("echo", cap, script="asgi_server.py", extra=["echo"])
    if kind == "srv-asgi-serve":
        return Server("echo", cap, script="asgi_server.py", extra=["echo", "--serve"])
    if kind == "srv-asgi-blk":
        return Server(blocking, cap, script="asgi_server.py", extra=[blocking])
    if kind == "srv-rel":
        return Server("echo", cap, released=released)
    if kind == "srv-rel-async":
        return Server("echo", cap, released=released, extra=["--async"])
    if kind in ("floor-aio", "floor-thr", "floor-uvicorn"):
        mode = {"floor-aio": "asyncio", "floor-thr": "threads", "floor-uvicorn": "uvicorn"}[kind]
        return Server("echo", cap, script="floor_server.py", extra=["--mode", mode])
    raise ValueError(kind)


def run_server_section(
    released: str,
    logdir: Path,
    sizes: Sequence[int],
    steps: int,
    rounds: int,
    kinds: Sequence[str],
    baseline: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Every server at every size, interleaved per round; one ``ours-aio`` client worker per server."""
    cap = max(sizes) + 8
    servers: dict[str, Server] = {}
    clients: dict[str, Worker] = {}
    out: dict[str, dict[str, Any]] = {}
    try:
        for kind in kinds:
            servers[kind] = start_server(kind, released, cap, baseline)
            clients[kind] = Worker("ours-aio", sys.executable, logdir, name=f"ours-aio-{kind}")
        for size in sizes:
            n = max(3, steps // size)
            log(f"server: {size} sessions, {n} batches x {rounds} rounds of {list(kinds)}")
            out[str(size)] = section_server(clients, servers, size, n, rounds)
    finally:
        for w in clients.values():
            w.quit()
        for sv in servers.values():
            sv.stop()
    return out


def section_boot(workers: dict[str, Worker], size: int, rounds: int) -> dict[str, Any]:
    """``ours-pool``: a pool of ``size`` containers; the others: one container (the docker op)."""

    def once(kind: str) -> dict[str, Any]:
        if kind == "ours-pool":
            return workers[kind].call(op="boot", image=ECHO_IMAGE, size=size)
        return workers[kind].call(op="docker", image=ECHO_IMAGE)

    kinds = list(workers)
    for kind in kinds:  # warm-up
        once(kind)
    raw = run_rounds(kinds, rounds, once)
    return _docker_summary(raw)


IMPORT_SNIPPET = (
    "import time, resource\n"
    "t0 = time.perf_counter()\n"
    "{stmt}\n"
    "t1 = time.perf_counter()\n"
    "import json, sys\n"
    "print(json.dumps({{'wall': t1 - t0, 'rss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
    " 'asyncio': 'asyncio' in sys.modules, 'modules': len(sys.modules)}}))\n"
)


def section_import(released: str | None, rounds: int) -> dict[str, Any]:
    contenders = {
        "bare": (sys.executable, "pass"),
        "ours-sync": (sys.executable, "import openenv.sync"),
        "ours-aio": (sys.executable, "import openenv.aio"),
        "floor-sync": (sys.executable, "import websockets.sync.client, httpx, pydantic"),
        "floor-async": (sys.executable, "import websockets.asyncio.client, httpx, pydantic"),
    }
    if released:
        contenders["rel"] = (released, "from openenv import GenericEnvClient")
    cwd = tempfile.gettempdir()

    def once(kind: str) -> dict[str, Any]:
        python, stmt = contenders[kind]
        t0 = time.perf_counter()
        out = subprocess.run(
            [python, "-I", "-c", IMPORT_SNIPPET.format(stmt=stmt)], capture_output=True, text=True, cwd=cwd, timeout=120
        )
        t1 = time.perf_counter()
        if out.returncode:
            raise RuntimeError(f"import {kind} failed: {out.stderr[-2000:]}")
        res = json.loads(out.stdout.strip().splitlines()[-1])
        res["process_wall"] = t1 - t0
        return res

    kinds = list(contenders)
    for kind in kinds:  # warm-up (page cache, .pyc files)
        once(kind)
    raw = run_rounds(kinds, rounds, once)
    result: dict[str, Any] = {}
    for kind, rs in raw.items():
        result[kind] = {
            "stmt": contenders[kind][1],
            "wall": statistics.median(r["wall"] for r in rs),
            "wall_min": min(r["wall"] for r in rs),
            "process_wall": statistics.median(r["process_wall"] for r in rs),
            "rss_mb": statistics.median(r["rss_kb"] for r in rs) / 1024,
            "asyncio": rs[0]["asyncio"],
            "modules": rs[0]["modules"],
            "rounds": len(rs),
            "by_round": {"wall": [r["wall"] for r in rs]},
        }
    bare = result["bare"]["rss_mb"]
    for kind in result:
        result[kind]["rss_delta_mb"] = result[kind]["rss_mb"] - bare
    return result


def docker_available() -> str | None:
    """None when a Docker engine answers and the echo image exists, else why not."""
    try:
        import docker  # type: ignore[import-untyped]
    except ImportError:
        return "docker-py is not installed in the bench venv"
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:
        return (
            f"no Docker engine answers ({type(exc).__name__}); start one with "
            "`python3 scripts/docker_setup.py` or `nox -s docker`"
        )
    try:
        client.images.get(ECHO_IMAGE)
    except Exception:
        return f"image {ECHO_IMAGE} is missing; build it with `python3 scripts/docker_setup.py`"
    finally:
        client.close()
    return None


def have_pool() -> bool:
    try:
        from openenv.sync import EnvPool  # noqa: F401
    except ImportError:
        return False
    return True


def section_docker(workers: dict[str, Worker], rounds: int) -> dict[str, Any]:
    kinds = list(workers)
    for kind in kinds:  # warm-up: one cold start each (image layers in the page cache)
        workers[kind].call(op="docker", image=ECHO_IMAGE)
    raw = run_rounds(kinds, rounds, lambda k: workers[k].call(op="docker", image=ECHO_IMAGE))
    return _docker_summary(raw)


def _docker_summary(raw: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for kind, rs in raw.items():
        result[kind] = {
            "ready": statistics.median(r["ready"] for r in rs),
            "ready_min": min(r["ready"] for r in rs),
            "ready_max": max(r["ready"] for r in rs),
            "close": statistics.median(r["close"] for r in rs),
            "total": statistics.median(r["total"] for r in rs),
            "left": max(r["left"] for r in rs),
            "rounds": len(rs),
            "by_round": {"ready": [r["ready"] for r in rs]},
        }
    return result


# ---------------------------------------------------------------------------
# targets
# ---------------------------------------------------------------------------


# (measure, section, key, numerator, denominator, op, bound, what); key "rate" is higher-is-better
TARGETS = [
    ("sync step p50", "step", "p50", "ours-sync", "raw-sync", "<=", 1.10, "ours / raw websockets.sync"),
    ("sync step p50", "step", "p50", "ours-sync", "rel-plain", "<=", 0.65, "ours / 0.10.0 plain sync calls"),
    ("sync step p50", "step", "p50", "ours-sync", "rel-dotsync", "<=", 0.65, "ours / 0.10.0 .sync()"),
    ("sync client CPU per step", "step", "cpu", "ours-sync", "raw-sync", "<=", 1.25, "ours / raw websockets.sync"),
    ("async step p50", "step", "p50", "ours-aio", "raw-async", "<=", 1.10, "ours / raw websockets.asyncio"),
    ("async step p50", "step", "p50", "ours-aio", "rel-await", "<=", 1.0, "ours / 0.10.0 awaited"),
    ("1 MiB observations, steps/s", "large", "rate", "ours-sync", "rel-plain", ">=", 15, "ours sync / 0.10.0 plain"),
    (
        "1 MiB observations, steps/s",
        "large",
        "rate",
        "ours-sync",
        "rel-dotsync",
        ">=",
        15,
        "ours sync / 0.10.0 .sync()",
    ),
    ("1 MiB observations, steps/s", "large", "rate", "ours-aio", "rel-await", ">=", 15, "ours aio / 0.10.0 awaited"),
    (
        "import openenv.sync wall time",
        "import",
        "wall",
        "ours-sync",
        "floor-sync",
        "<=",
        1.5,
        "ours / websockets.sync.client+httpx+pydantic",
    ),
    (
        "Docker cold start to first reset",
        "docker",
        "ready",
        "ours-sync",
        "floor-docker",
        "<=",
        1.2,
        "ours sync / docker-py floor",
    ),
    (
        "Docker cold start to first reset",
        "docker",
        "ready",
        "ours-aio",
        "floor-docker",
        "<=",
        1.2,
        "ours aio / docker-py floor",
    ),
    ("Docker cold start to first reset", "docker", "ready", "rel-await", "ours-sync", ">=", 2, "0.10.0 / ours sync"),
    ("Docker cold start to first reset", "docker", "ready", "rel-await", "ours-aio", ">=", 2, "0.10.0 / ours aio"),
    *(
        (f"{size} sessions, {label}: batches/s", f"{prefix}{size}", "rate", "ours-pool", den, ">=", bound, what)
        for prefix, label in (("pool", "echo"), ("pool-sleep", f"sleep {SLEEP_MS} ms"))
        for size, den, bound, what in (
            (8, "ours-aio", 0.9, "sync-pool / aio-gather"),
            (8, "ours-sync", 5, "sync-pool / sync-seq"),
            (8, "rel-dotsync", 2, "sync-pool / released-threads"),
            (32, "ours-aio", 0.9, "sync-pool / aio-gather"),
            (32, "rel-dotsync", 2, "sync-pool / released-threads"),
        )
    ),
    (
        "Docker boot of 8 containers, to first reset on all",
        "boot",
        "ready",
        "ours-pool",
        "ours-sync",
        "<=",
        1.5,
        "EnvPool of 8 / Env of 1",
    ),
]


for _size in SERVER_SIZES:
    for _ours, _what in (("srv-aio", "embedded (asyncio)"), ("srv-asgi", "ASGI app")):
        TARGETS += [
            (
                f"{_size} sessions, {_what}, echo on the loop: steps/s",
                f"server{_size}",
                "rate",
                _ours,
                "srv-rel",
                ">=",
                2.0,
                f"{_ours} / 0.10.0 sync env",
            ),
            (
                f"{_size} sessions, {_what}, echo on the loop: steps/s",
                f"server{_size}",
                "rate",
                _ours,
                "srv-rel-async",
                ">=",
                1.2,
                f"{_ours} / 0.10.0 async env",
            ),
            (
                f"{_size} sessions, {_what}, echo on the loop: server CPU/step",
                f"server{_size}",
                "server_cpu_step",
                _ours,
                "floor-aio",
                "<=",
                1.5,
                f"{_ours} / raw websockets asyncio",
            ),
        ]
    for _ours, _what in (("srv-aio-blk", "embedded (asyncio)"), ("srv-asgi-blk", "ASGI app")):
        TARGETS.append(
            (
                f"{_size} sessions, {_what}, blocking echo: steps/s",
                f"server{_size}",
                "rate",
                _ours,
                "srv-rel",
                ">=",
                1.2,
                f"{_ours} / 0.10.0 sync env",
            )
        )


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target as the ratio of the two medians (what decides met/missed), plus the median of
    per-round paired ratios (both contenders measured next to each other in the same round)."""
    out: list[dict[str, Any]] = []
    for measure, section, key, num, den, op, bound, what in TARGETS:
        if section.startswith("server") and section not in res:
            continue  # a size (or the whole server section) not run
        a = res.get(section, {}).get(num)
        b = res.get(section, {}).get(den)
        row: dict[str, Any] = {
            "measure": measure,
            "section": section,
            "target": f"{op} {bound:g} ({what})",
            "ratio": None,
            "paired": None,
            "met": None,
        }
        if a and b:
            ratio = a[key] / b[key]
            ra, rb = a.get("by_round", {}).get(key, []), b.get("by_round", {}).get(key, [])
            pairs = [x / y for x, y in zip(ra, rb, strict=False) if y]
            row["ratio"] = ratio
            row["paired"] = statistics.median(pairs) if pairs else None
            row["met"] = ratio <= bound if op == "<=" else ratio >= bound
        out.append(row)
    return out


# ---------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------


def us(x: float) -> str:
    return f"{x * 1e6:,.0f} µs" if x < 1e-2 else f"{x * 1e3:,.1f} ms"


def _vs(v: dict[str, Any], base: dict[str, Any] | None) -> str:
    """``ratio of medians [min – max of per-round ratios]`` of steps/s."""
    if not base:
        return "–"
    pairs = [a / b for a, b in zip(v["by_round"]["rate"], base["by_round"]["rate"], strict=False) if b]
    spread = f" [{min(pairs):.2f} – {max(pairs):.2f}]" if pairs else ""
    return f"{v['rate'] / base['rate']:.2f}×{spread}"


def _round_spread(v: dict[str, Any], base: dict[str, Any], key: str) -> str:
    """`` [min – max]`` of the per-round ratios of ``key`` (both measured in the same round),
    so a ratio of medians can be told from noise; empty when the rounds are not recorded."""
    pairs = [a / b for a, b in zip(v["by_round"][key], base["by_round"][key], strict=False) if b]
    if v is base or not pairs:
        return ""
    return f" [{min(pairs):.2f} – {max(pairs):.2f}]"


def markdown(results: dict[str, Any]) -> str:
    meta, res = results["meta"], results["sections"]
    lines = [
        "# Benchmark results",
        "",
        f"Run {meta['started']} on {meta['machine']}; Python {meta['python']}, websockets {meta['websockets']}; "
        f"{meta['rounds']} rounds (concurrent {meta.get('conc_rounds')}, import {meta.get('import_rounds')}, "
        f"Docker {meta.get('docker_rounds')}, boot {meta.get('boot_rounds')}), sections "
        f"{', '.join(meta.get('sections', []))}; {meta['duration_s']:.0f} s in all, load average "
        f"{meta['load_before'][0]:.1f} before and {meta['load_after'][0]:.1f} after. Generated by `nox -s bench` "
        "(bench/run.py); what each contender does: bench/README.md. Medians of one run; ratios are "
        "between contenders measured side by side, interleaved round-robin.",
        "",
    ]
    notes = meta.get("notes") or []
    if notes:
        lines += ["Notes:", ""] + [f"* {n}" for n in notes] + [""]

    def steps_table(title: str, sec: dict[str, Any], unit_note: str) -> None:
        if not sec:
            return
        base = {k: sec.get("raw-sync" if k in SYNC_KINDS else "raw-async") for k in sec}
        lines.extend(
            [
                f"## {title}",
                "",
                unit_note,
                "",
                "| contender | p50 | p99 | p50 range over rounds | vs floor p50 [per-round min – max] "
                "| client CPU/op | vs floor CPU [per-round min – max] | ops/s |",
                "|---|---|---|---|---|---|---|---|",
            ]
        )
        for k, s in sec.items():
            b = base[k]
            vs = f"{s['p50'] / b['p50']:.2f}×{_round_spread(s, b, 'p50')}" if b else "–"
            vc = f"{s['cpu'] / b['cpu']:.2f}×{_round_spread(s, b, 'cpu')}" if b else "–"
            lines.append(
                f"| {LABELS.get(k, k)} | {us(s['p50'])} | {us(s['p99'])} | {us(s['p50_min'])} – "
                f"{us(s['p50_max'])} | {vs} | {us(s['cpu'])} | {vc} | {s['rate']:,.1f} |"
            )
        lines.append("")

    steps_table(
        "Sequential step, small observations (echo server)",
        res.get("step", {}),
        f"{meta.get('step_n')} steps per contender per round on one session.",
    )
    steps_table(
        "Sequential step, 1 MiB observations (bench.envs:BlobEnvironment)",
        res.get("large", {}),
        f"{meta.get('large_n')} steps per contender per round; each observation carries 1 MiB of base64 text.",
    )
    steps_table(
        "Fresh session setup (connect + reset + close)",
        res.get("setup", {}),
        f"{meta.get('setup_n')} setups per contender per round.",
    )
    steps_table(
        "64 concurrent async sessions (server --max-sessions 64)",
        res.get("concurrent", {}),
        f"{meta.get('conc_sessions')} sessions × {meta.get('conc_steps')} steps per round, all in flight "
        "together; latency is per step, ops/s is steps/s across all sessions.",
    )
    imp = res.get("import")
    if imp:
        lines.extend(
            [
                "## Import (fresh interpreter, `python -I`)",
                "",
                "Wall time of the import statement alone, the whole process (interpreter start "
                "included), and peak RSS after the import (Δ over `pass`).",
                "",
                "| statement | import wall | vs floor | process wall | peak RSS | Δ RSS | imports asyncio | modules |",
                "|---|---|---|---|---|---|---|---|",
            ]
        )
        floor = imp.get("floor-sync", {}).get("wall")
        for k, s in imp.items():
            where = " (0.10.0 venv)" if k == "rel" else ""
            vs = f"{s['wall'] / floor:.2f}×" if floor else "–"
            lines.append(
                f"| `{s['stmt']}`{where} | {s['wall'] * 1e3:,.1f} ms | {vs} | {s['process_wall'] * 1e3:,.0f} ms | "
                f"{s['rss_mb']:.1f} MB | {s['rss_delta_mb']:+.1f} MB | "
                f"{'yes' if s['asyncio'] else 'no'} | {s['modules']} |"
            )
        lines.append("")
    dk = res.get("docker")
    if dk:
        lines.extend(
            [
                f"## Docker cold start (`{ECHO_IMAGE}`)",
                "",
                "`ready`: from the call to the first reset's reply; `close`: until the container is removed.",
                "",
                "| contender | to first reset | range | close | total | vs floor (ready) | containers left |",
                "|---|---|---|---|---|---|---|",
            ]
        )
        floor = dk.get("floor-docker", {}).get("ready")
        for k, s in dk.items():
            vs = f"{s['ready'] / floor:.2f}×" if floor else "–"
            lines.append(
                f"| {LABELS.get(k, k)} | {s['ready']:.3f} s | {s['ready_min']:.3f} – {s['ready_max']:.3f} s | "
                f"{s['close']:.3f} s | {s['total']:.3f} s | {vs} | {s['left']} |"
            )
        lines.append("")
    elif "docker" in meta.get("skipped", {}):
        lines.extend(["## Docker cold start", "", f"Skipped: {meta['skipped']['docker']}", ""])
    for (prefix, (spec, _, heading)), size in itertools.product(POOL_VARIANTS.items(), (8, 32)):
        pool = res.get(f"{prefix}{size}")
        if not pool:
            continue
        ref = pool.get("ours-pool", {}).get("rate")
        batches = (meta.get("pool_batches") or {}).get(prefix, {}).get(str(size))
        lines.extend(
            [
                f"## Batch step over {size} sessions, {heading}",
                "",
                f"Server `python -m openenv serve {spec} --max-sessions {4 * 32 + 8}`. A batch is one step on "
                f"each of the {size} sessions; {batches} batches per contender per round, every contender's "
                "sessions open for the whole section.",
                "",
                "| contender | batch p50 | p50 range over rounds | batch p99 | batches/s | steps/s "
                "| client CPU/step | server CPU/step | server busy | sync-pool's throughput / this |",
                "|---|---|---|---|---|---|---|---|---|---|",
            ]
        )
        for k, v in pool.items():
            vs = f"{ref / v['rate']:.2f}×" if ref else "–"
            lines.append(
                f"| {POOL_LABELS.get(k, k)} | {us(v['p50'])} | {us(v['p50_min'])} – {us(v['p50_max'])} | "
                f"{us(v['p99'])} | {v['rate']:,.1f} | {v['steps_rate']:,.0f} | {us(v['cpu_step'])} | "
                f"{us(v['server_cpu_step'])} | {v['server_busy']:.0%} | {vs} |"
            )
        lines.append("")
    boot = res.get("boot")
    if boot:
        size = meta.get("boot_size", 8)
        lines.extend(
            [
                f"## Booting {size} containers vs 1 (`{ECHO_IMAGE}`)",
                "",
                "`ready`: from the call until every session's first reset replied (pool: entered, then "
                "`pool.reset()`); `close`: until every container is removed.",
                "",
                "| contender | to first reset | range | close | total | vs 1 container (ours) | containers left |",
                "|---|---|---|---|---|---|---|",
            ]
        )
        one = boot.get("ours-sync", {}).get("ready")
        for k, v in boot.items():
            vs = f"{v['ready'] / one:.2f}×" if one else "–"
            lines.append(
                f"| {BOOT_LABELS.get(k, k).format(size=size)} | {v['ready']:.3f} s | {v['ready_min']:.3f} – "
                f"{v['ready_max']:.3f} s | {v['close']:.3f} s | {v['total']:.3f} s | {vs} | {v['left']} |"
            )
        lines.append("")
    elif "boot" in meta.get("skipped", {}):
        lines.extend(["## Booting containers", "", f"Skipped: {meta['skipped']['boot']}", ""])
    srv = res.get("server")
    if srv:
        lines.extend(
            [
                "## Server: our transports against 0.10.0's server and the raw websockets floors",
                "",
                "The same client for every server: one `openenv.aio.Env` worker per server holding N sessions, a "
                "batch = `asyncio.gather` of one step on each; every server in its own process, all of them "
                f"running at once, blocks interleaved round-robin ({meta.get('server_rounds')} rounds, "
                f"max(3, {meta.get('server_steps')} / N) batches per block). Server CPU from /proc (user + system, "
                "all threads) summed over all blocks; RSS and threads read with the N sessions open. "
                "`vs 0.10.0 sync` / `vs 0.10.0 async`: ratio of the median steps/s, then [min – max] of the "
                "per-round ratios (the same round's blocks, minutes apart at most).",
                "",
            ]
        )
        for size, table in srv.items():
            base = table.get("srv-rel")
            base_async = table.get("srv-rel-async")
            floor = table.get("floor-aio")
            lines.extend(
                [
                    f"### {size} sessions",
                    "",
                    "| server | steps/s | vs 0.10.0 sync | vs 0.10.0 async | server CPU/step | vs asyncio floor CPU "
                    "| batch p50 | server busy | RSS | threads |",
                    "|---|---|---|---|---|---|---|---|---|---|",
                ]
            )
            for k, v in table.items():
                label = SERVER_LABELS.get(k) or BASELINE_LABELS.get(k, k)
                lines.append(
                    f"| {label} | {v['steps_rate']:,.0f} | {_vs(v, base)} | {_vs(v, base_async)} | "
                    f"{us(v['server_cpu_step'])} | "
                    f"{(v['server_cpu_step'] / floor['server_cpu_step']) if floor else float('nan'):.2f}× | "
                    f"{us(v['p50'])} | {v['server_busy']:.0%} | {v['rss_mib']:.0f} MiB | {v['threads']} |"
                )
            lines.append("")
    elif "server" in meta.get("skipped", {}):
        lines.extend(["## Server", "", f"Skipped: {meta['skipped']['server']}", ""])
    lines.extend(
        [
            "## Targets",
            "",
            "`ratio` is the ratio of the two medians above and decides met/missed; `paired` is the "
            "median over rounds of the same ratio within each round (a check on noise).",
            "",
            "| measure | target | ratio | paired | met |",
            "|---|---|---|---|---|",
        ]
    )
    chosen = set(meta.get("sections", SECTIONS))
    for t in results["targets"]:
        if t["met"] is None and t.get("section", "").split("-")[0].rstrip("0123456789") not in chosen:
            continue  # a section this run left out
        ratio = "–" if t["ratio"] is None else f"{t['ratio']:.3f}"
        paired = "–" if t.get("paired") is None else f"{t['paired']:.3f}"
        met = "not measured" if t["met"] is None else ("**met**" if t["met"] else "**missed**")
        lines.append(f"| {t['measure']} | {t['target']} | {ratio} | {paired} | {met} |")
    lines.append("")
    return "\n".join(lines)


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = results["sections"]
    panels: list[tuple] = []
    if res.get("step"):
        panels.append(("step p50, small (µs)", {k: v["p50"] * 1e6 for k, v in res["step"].items()}))
        panels.append(("client CPU per step, small (µs)", {k: v["cpu"] * 1e6 for k, v in res["step"].items()}))
    if res.get("large"):
        panels.append(
            ("1 MiB observations: steps/s (higher is better)", {k: v["rate"] for k, v in res["large"].items()})
        )
    if res.get("setup"):
        panels.append(("session setup p50 (ms)", {k: v["p50"] * 1e3 for k, v in res["setup"].items()}))
    if res.get("concurrent"):
        panels.append(("64 sessions: steps/s (higher is better)", {k: v["rate"] for k, v in res["concurrent"].items()}))
    if res.get("import"):
        panels.append(
            ("import wall (ms)", {f"imp:{k}": v["wall"] * 1e3 for k, v in res["import"].items() if k != "bare"})
        )
    if res.get("docker"):
        panels.append(("Docker: to first reset (s)", {k: v["ready"] for k, v in res["docker"].items()}))
    for prefix, size in itertools.product(POOL_VARIANTS, (8, 32)):
        if res.get(f"{prefix}{size}"):
            what = "echo" if prefix == "pool" else f"sleep {SLEEP_MS} ms"
            panels.append(
                (
                    f"{size} sessions, {what}: steps/s in batches (higher is better)",
                    {f"pool:{k}": v["steps_rate"] for k, v in res[f"{prefix}{size}"].items()},
                )
            )
    if res.get("boot"):
        panels.append(("boot: to first reset on all (s)", {f"boot:{k}": v["ready"] for k, v in res["boot"].items()}))
    for size, table in (res.get("server") or {}).items():
        panels.append(
            (f"server, {size} sessions: steps/s (higher is better)", {k: v["steps_rate"] for k, v in table.items()})
        )
    if not panels:
        return
    cols = 2
    rows = (len(panels) + 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(14, 3.2 * rows), squeeze=False)
    for ax, (title, data) in zip(axes.flat, panels, strict=False):
        names = [IMPORT_LABELS.get(k, LABELS.get(k, k)) for k in data]
        names = [CHART_LABELS.get(n, n.split(":", 1)[1] if n.startswith(("pool:", "boot:")) else n) for n in names]
        colors = [
            "tab:green"
            if k.startswith(("ours", "imp:ours", "pool:ours", "boot:ours", "srv-ours"))
            else "tab:gray"
            if ("raw" in k or "floor" in k)
            else "tab:orange"
            if k.startswith(("rel", "imp:rel", "pool:rel", "boot:rel", "srv-rel"))
            else "tab:blue"
            for k in data
        ]
        ax.barh(names, list(data.values()), color=colors)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.tick_params(labelsize=8)
        for i, v in enumerate(data.values()):
            ax.text(v, i, f" {v:,.3g}", va="center", fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(f"openenv benchmarks, {results['meta']['started']} (green: ours, grey: floors, orange: 0.10.0)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument(
        "--released-python",
        default=None,
        help="python of a venv with openenv==0.10.0 (without it, the released client is left out)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=15,
        help="measured rounds of the step, large and setup sections (default 15; import: 3/5 of it, concurrent: half)",
    )
    parser.add_argument(
        "--step-steps",
        type=int,
        default=1000,
        help="steps per contender per round of the step section (default 1000: shorter blocks swing with the "
        "scheduler on a shared machine)",
    )
    parser.add_argument(
        "--docker-rounds", type=int, default=7, help="measured rounds of the Docker section (default 7)"
    )
    parser.add_argument("--boot-rounds", type=int, default=4, help="measured rounds of the boot section (default 4)")
    parser.add_argument(
        "--server-rounds", type=int, default=9, help="measured rounds of the server section (default 9)"
    )
    parser.add_argument(
        "--server-sizes",
        default="8,32,128,512",
        help="sessions per server in the server section (default 8,32,128,512)",
    )
    parser.add_argument(
        "--server-steps",
        type=int,
        default=SERVER_STEPS,
        help=f"steps per server per block in the server section (default {SERVER_STEPS})",
    )
    parser.add_argument(
        "--servers", default="", help=f"the server section's servers (default all: {','.join(SERVER_LABELS)})"
    )
    parser.add_argument(
        "--baseline-src",
        default=None,
        help="another tree's src directory (e.g. `git archive main src | tar -x -C /tmp/base`, then "
        "/tmp/base/src): adds base-aio and base-aio-blk (its asyncio transport) and base-asgi (its ASGI app) "
        "to the server section",
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run (few rounds and steps)")
    parser.add_argument("--out", default=str(HERE / "results"), help="results directory (default bench/results)")
    parser.add_argument("--no-commit-copy", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args(argv)

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {sorted(unknown)}; choose from {SECTIONS}")
    rounds = 2 if args.quick else args.rounds
    conc_rounds = 2 if args.quick else max(3, rounds // 2)
    import_rounds = 2 if args.quick else max(3, rounds * 3 // 5)
    docker_rounds = 1 if args.quick else args.docker_rounds
    step_n, large_n, setup_n = (100, 5, 10) if args.quick else (args.step_steps, 10, 15)
    conc_sessions, conc_steps = 64, (5 if args.quick else 20)
    boot_rounds = 1 if args.quick else args.boot_rounds
    boot_size = 8
    # the sleep variant's blocks are shorter: sync-seq spends N x SLEEP_MS per batch there
    pool_batches = {
        "pool": {8: 10, 32: 4} if args.quick else {8: 60, 32: 20},
        "pool-sleep": {8: 4, 32: 2} if args.quick else {8: 30, 32: 10},
    }
    server_sizes = (8, 32) if args.quick else tuple(int(x) for x in args.server_sizes.split(","))
    server_steps = 200 if args.quick else args.server_steps
    server_rounds = 2 if args.quick else args.server_rounds
    only_servers = [k for k in args.servers.split(",") if k] if args.servers else list(SERVER_LABELS)
    baseline = str(Path(args.baseline_src).resolve()) if args.baseline_src else None
    if baseline is not None and not args.servers:
        only_servers += list(BASELINE_LABELS)
    unknown_servers = set(only_servers) - set(SERVER_LABELS) - set(BASELINE_LABELS)
    if unknown_servers:
        parser.error(f"unknown server(s) {sorted(unknown_servers)}")
    if baseline is None and set(only_servers) & set(BASELINE_LABELS):
        parser.error("base-aio, base-aio-blk and base-asgi need --baseline-src")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    logdir = out_dir / "logs"
    logdir.mkdir(exist_ok=True)

    released = args.released_python
    notes: list[str] = []
    skipped: dict[str, str] = {}
    if released is None:
        notes.append("the released client (openenv==0.10.0) was left out: no --released-python given")

    import websockets

    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t_start = time.monotonic()
    meta: dict[str, Any] = {
        "started": started,
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.platform()})",
        "python": platform.python_version(),
        "websockets": websockets.__version__,
        "rounds": rounds,
        "conc_rounds": conc_rounds,
        "import_rounds": import_rounds,
        "docker_rounds": docker_rounds,
        "boot_rounds": boot_rounds,
        "boot_size": boot_size,
        "pool_batches": {p: {str(k): v for k, v in b.items()} for p, b in pool_batches.items()},
        "sleep_ms": SLEEP_MS,
        "server_sizes": list(server_sizes),
        "server_steps": server_steps,
        "server_rounds": server_rounds,
        "step_n": step_n,
        "large_n": large_n,
        "setup_n": setup_n,
        "conc_sessions": conc_sessions,
        "conc_steps": conc_steps,
        "sections": only,
        "notes": notes,
        "skipped": skipped,
        "load_before": os.getloadavg(),
    }
    res: dict[str, Any] = {}

    kinds = ["ours-sync", "raw-sync", "ours-aio", "raw-async"]
    if released:
        kinds += ["rel-plain", "rel-dotsync", "rel-await"]
    pool_missing = None if have_pool() else "this build has no `openenv.sync.EnvPool`"
    if pool_missing and "pool" in only:
        notes.append(f"pool: the sync-pool contender was left out: {pool_missing}")
    if pool_missing and "boot" in only:
        skipped["boot"] = pool_missing
    if ("pool" in only or "boot" in only) and not pool_missing:
        kinds.append("ours-pool")
    docker_skip = docker_available() if ("docker" in only or "boot" in only) else None
    for sec in ("docker", "boot"):
        if docker_skip and sec in only and sec not in skipped:
            skipped[sec] = docker_skip
            log(f"{sec}: skipped: {docker_skip}")
    if "server" in only and not released:
        skipped["server"] = "no --released-python given: the released server needs the 0.10.0 venv"
        log(f"server: skipped: {skipped['server']}")
    # only the workers the chosen sections use
    uses = {
        "step": set(kinds),
        "large": set(kinds),
        "setup": set(kinds),
        "concurrent": {"ours-aio", "raw-async", "rel-await"},
        "docker": set() if docker_skip else {"ours-sync", "ours-aio", "raw-sync", "rel-await"},
        "pool": set(POOL_KINDS),
        "boot": set() if "boot" in skipped else {"ours-pool", "ours-sync", "rel-await"},
    }
    wanted = set().union(*(uses.get(sec, set()) for sec in only))
    kinds = [k for k in kinds if k in wanted]
    need_workers = any(s in only for s in ("step", "large", "setup", "concurrent", "pool")) or (
        any(s in only for s in ("docker", "boot")) and not docker_skip
    )

    workers: dict[str, Worker] = {}
    servers: list[Server] = []
    try:
        if need_workers:
            for kind in kinds:
                python = released if kind.startswith("rel") else sys.executable
                workers[kind] = Worker(kind, python, logdir)
            meta["worker_websockets"] = {k: w.websockets for k, w in workers.items()}
        order = [
            k
            for k in ("ours-sync", "raw-sync", "rel-plain", "rel-dotsync", "ours-aio", "raw-async", "rel-await")
            if k in workers
        ]
        echo = None
        if any(s in only for s in ("step", "setup", "concurrent")):
            echo = Server("echo", conc_sessions)
            servers.append(echo)
        if "step" in only:
            assert echo is not None
            log(f"step: {step_n} small steps x {rounds} rounds ({echo.url})")
            res["step"] = section_steps({k: workers[k] for k in order}, echo.url, step_n, rounds, 200, 0)
        if "large" in only:
            blob = Server("bench.envs:BlobEnvironment", 16, env={"BENCH_BLOB_BYTES": str(BLOB)})
            servers.append(blob)
            log(f"large: {large_n} 1 MiB steps x {rounds} rounds ({blob.url})")
            try:
                res["large"] = section_steps({k: workers[k] for k in order}, blob.url, large_n, rounds, 3, BLOB)
            finally:
                blob.stop()
        if "setup" in only:
            assert echo is not None
            log(f"setup: {setup_n} connect+reset+close x {rounds} rounds")
            res["setup"] = section_setup({k: workers[k] for k in order}, echo.url, setup_n, rounds)
        if "concurrent" in only:
            assert echo is not None
            conc = [k for k in ("ours-aio", "raw-async", "rel-await") if k in workers]
            log(f"concurrent: {conc_sessions} sessions x {conc_steps} steps x {conc_rounds} rounds")
            res["concurrent"] = section_concurrent(
                {k: workers[k] for k in conc}, echo.url, conc_sessions, conc_steps, conc_rounds
            )
        if "import" in only:
            log(f"import: {import_rounds} rounds")
            res["import"] = section_import(released, import_rounds)
        if "docker" in only and not docker_skip:
            dkinds = [k for k in ("ours-sync", "ours-aio", "raw-sync", "rel-await") if k in workers]
            log(f"docker: {docker_rounds} rounds of {dkinds}")
            dres = section_docker({k: workers[k] for k in dkinds}, docker_rounds)
            res["docker"] = {("floor-docker" if k == "raw-sync" else k): v for k, v in dres.items()}
        if "pool" in only:
            pkinds = [k for k in POOL_KINDS if k in workers]
            for prefix, (spec, env, _) in POOL_VARIANTS.items():
                pserver = Server(spec, len(pkinds) * 32 + 8, env=env)
                servers.append(pserver)
                try:
                    for size in (8, 32):
                        n = pool_batches[prefix][size]
                        log(f"{prefix}: {size} sessions, {n} batches x {rounds} rounds of {pkinds} ({spec})")
                        # warm-up: 200 steps per contender on echo; a fifth of a block when every step sleeps
                        warmup = max(3, 200 // size) if prefix == "pool" else max(3, n // 5)
                        res[f"{prefix}{size}"] = section_pool(
                            {k: workers[k] for k in pkinds}, pserver, size, n, rounds, warmup
                        )
                finally:
                    pserver.stop()
                    servers.remove(pserver)
        if "boot" in only and not docker_skip and not pool_missing:
            bkinds = [k for k in ("ours-pool", "ours-sync", "rel-await") if k in workers]
            log(f"boot: {boot_size} containers vs 1, {boot_rounds} rounds of {bkinds}")
            res["boot"] = section_boot({k: workers[k] for k in bkinds}, boot_size, boot_rounds)
        if "server" in only and released:
            res["server"] = run_server_section(
                released, logdir, server_sizes, server_steps, server_rounds, only_servers, baseline
            )
            for size, table in res["server"].items():
                res[f"server{size}"] = table
    finally:
        for w in workers.values():
            w.quit()
        for s in servers:
            s.stop()

    meta["duration_s"] = time.monotonic() - t_start
    meta["load_after"] = os.getloadavg()
    results = {"meta": meta, "sections": res}
    results["targets"] = targets(res)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out_dir / f"results-{stamp}.json").write_text(json.dumps(results, indent=2))
    (out_dir / "latest.json").write_text(json.dumps(results, indent=2))
    md = markdown(results)
    (out_dir / f"results-{stamp}.md").write_text(md)
    (out_dir / "latest.md").write_text(md)
    try:
        chart(results, out_dir / f"results-{stamp}.png")
        chart(results, out_dir / "latest.png")
    except ImportError:
        log("matplotlib missing: no chart")
    if not args.no_commit_copy:
        (HERE / "RESULTS.md").write_text(md)
    print(md)
    log(f"results in {out_dir} ({meta['duration_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
