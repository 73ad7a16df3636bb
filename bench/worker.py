"""One benchmark contender in its own process, driven by ``bench/run.py``.

Usage: ``python bench/worker.py KIND``; commands arrive as JSON lines on stdin,
each answered by one JSON line on stdout. The same file runs in the bench venv
(our client and the raw ``websockets`` floors) and in the venv of the released
``openenv==0.10.0`` (whose import name is also ``openenv``, so it never shares
a process with ours). Only the stdlib and ``websockets`` are imported at the
top; each KIND imports its own client in ``init``.

Kinds (what each one does is documented in bench/README.md):

    ours-sync    openenv.sync.Env                       (bench venv)
    ours-aio     openenv.aio.Env                        (bench venv)
    raw-sync     websockets.sync.client by hand         (bench venv, the sync floor)
    raw-async    websockets.asyncio.client by hand      (bench venv, the async floor)
    rel-await    openenv 0.10.0 GenericEnvClient, awaited        (released venv)
    rel-plain    openenv 0.10.0 GenericEnvClient, plain calls    (released venv)
    rel-dotsync  openenv 0.10.0 GenericEnvClient(...).sync()     (released venv)
    ours-pool    openenv.sync.EnvPool                   (bench venv)

Commands: ``open`` (connect + reset + warm-up on one session), ``steps``
(n timed steps), ``close``, ``setup`` (n x connect+reset+close), ``conc``
(S sessions x M concurrent steps), ``docker`` (one cold start), ``mopen``
(N sessions), ``batches`` (n timed batches: one step on every session),
``mclose``, ``boot`` (a pool of N containers: one cold start), ``quit``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
import traceback
from typing import Any

# The options our client uses on loopback (src/openenv/_core/options.py): the
# raw floors use exactly these.
MAX_SIZE = 100 * 1024 * 1024
RAW_OPTIONS: dict[str, Any] = dict(
    compression=None,
    max_size=MAX_SIZE,
    ping_interval=20.0,
    ping_timeout=20.0,
    open_timeout=10.0,
    close_timeout=5.0,
    proxy=None,
)
LABEL_PID = "org.openenv.pid"  # our containers' owner label (src/openenv/_core/containers.py)

_now = time.perf_counter_ns
_cpu = time.process_time


def _switches() -> int:
    """This process's voluntary context switches so far (a wait that blocked: a reply not there yet)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://", 1).rstrip("/") + "/ws"


def _retry_deadline() -> float:
    return time.monotonic() + 10.0


# ---------------------------------------------------------------------------
# sync contenders
# ---------------------------------------------------------------------------


class SyncContender:
    """Base for blocking contenders: one ``session`` object at a time."""

    def __init__(self) -> None:
        self.session: Any = None
        self.action: dict[str, Any] = {}

    # one-session API, implemented per kind
    def connect(self, url: str) -> Any: ...
    def reset(self, s: Any) -> dict[str, Any]: ...
    def step(self, s: Any, action: dict[str, Any]) -> dict[str, Any]: ...
    def close(self, s: Any) -> None: ...

    def open(self, url: str, message: str, warmup: int, blob: int) -> dict[str, Any]:
        self.action = {"message": message}
        deadline = _retry_deadline()
        while True:  # the server frees a slot just after the previous session closed
            try:
                s = self.connect(url)
                self.reset(s)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        obs = self.step(s, self.action)
        _check(obs, message, blob)
        for _ in range(warmup):
            self.step(s, self.action)
        self.session = s
        return {"ok": True}

    def steps(self, n: int) -> dict[str, Any]:
        s, action, step = self.session, self.action, self.step
        lat: list[int] = []
        append = lat.append
        gc.collect()
        s0 = _switches()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            step(s, action)
            append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9, "switches": _switches() - s0}

    def close_session(self) -> dict[str, Any]:
        if self.session is not None:
            self.close(self.session)
            self.session = None
        return {"ok": True}

    def setup(self, url: str, n: int) -> dict[str, Any]:
        lat: list[int] = []
        gc.collect()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            s = self.connect(url)
            self.reset(s)
            self.close(s)
            lat.append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9}


class Many:
    """Mixin: N sessions at once, stepped as one batch (the pool section)."""

    many: list[Any]

    def mopen(self, url: str, size: int, message: str, warmup: int) -> dict[str, Any]:
        self.action = {"message": message}  # type: ignore[attr-defined]
        self.many = []
        deadline = _retry_deadline()
        while len(self.many) < size:  # slots free up just after another contender's sessions closed
            try:
                s = self.connect(url)  # type: ignore[attr-defined]
                self.reset(s)  # type: ignore[attr-defined]
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
                continue
            self.many.append(s)
        self.start_batches(size)
        for obs in self.batch():
            _check(obs, message, 0)
        for _ in range(warmup):
            self.batch()
        return {"ok": True}

    def start_batches(self, size: int) -> None:
        pass

    def batch(self) -> list[Any]:
        """One step on every session, one after another."""
        step, action = self.step, self.action  # type: ignore[attr-defined]
        return [step(s, action) for s in self.many]

    def batches(self, n: int) -> dict[str, Any]:
        batch = self.batch
        lat: list[int] = []
        gc.collect()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            batch()
            lat.append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9}

    def mclose(self) -> dict[str, Any]:
        for s in getattr(self, "many", []):
            self.close(s)  # type: ignore[attr-defined]
        self.many = []
        return {"ok": True}


class OursSync(Many, SyncContender):
    def __init__(self) -> None:
        super().__init__()
        from openenv.sync import Env

        self.Env = Env

    def connect(self, url: str) -> Any:
        return self.Env(url).connect()

    def reset(self, s: Any) -> Any:
        return s.reset().observation

    def step(self, s: Any, action: dict[str, Any]) -> Any:
        return s.step(action).observation

    def close(self, s: Any) -> None:
        s.close()

    def docker(self, image: str) -> dict[str, Any]:
        t0 = _now()
        env = self.Env.from_docker_image(image)
        env.reset()
        t1 = _now()
        env.close()
        t2 = _now()
        return _docker_times(t0, t1, t2, _left_by_label())


class RawSync(SyncContender):
    """The sync floor: websockets.sync.client, the JSON exchange by hand."""

    def __init__(self) -> None:
        super().__init__()
        from websockets.sync.client import connect

        self._connect = connect

    def connect(self, url: str) -> Any:
        # entered like a context manager, as our client does (websockets >= 17.1 warns otherwise)
        return self._connect(ws_url(url), **RAW_OPTIONS).__enter__()

    def reset(self, ws: Any) -> Any:
        ws.send('{"type":"reset","data":{}}')
        return _reply(ws.recv())

    def step(self, ws: Any, action: dict[str, Any]) -> Any:
        ws.send(json.dumps({"type": "step", "data": action}))
        return _reply(ws.recv())

    def close(self, ws: Any) -> None:
        ws.send('{"type":"close"}')
        ws.close()

    def docker(self, image: str) -> dict[str, Any]:
        """The floor: a minimal docker-py sequence, then the raw WebSocket."""
        import http.client

        import docker

        t0 = _now()
        client = docker.from_env()
        container = client.containers.run(
            image, detach=True, ports={"8000/tcp": ("127.0.0.1", None)}, labels={"org.openenv.bench": "floor"}
        )
        container.reload()
        port = int(container.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"])
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                ok = conn.getresponse().status == 200
                conn.close()
                if ok:
                    break
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("floor: /health never answered")
            time.sleep(0.01)
        ws = self.connect(f"http://127.0.0.1:{port}")
        self.reset(ws)
        t1 = _now()
        self.close(ws)
        container.remove(force=True)
        client.close()
        t2 = _now()
        return _docker_times(t0, t1, t2, _left_by_id(container.id))


class RelSync(Many, SyncContender):
    """openenv 0.10.0: plain sync calls (``dotsync=False``) or ``.sync()``.

    Many sessions (``mopen``/``batches``): one client per session, a batch is
    one ``step`` per client submitted to a ``ThreadPoolExecutor`` of N threads.
    """

    def __init__(self, dotsync: bool) -> None:
        super().__init__()
        from openenv import GenericEnvClient

        self.Client = GenericEnvClient
        self.dotsync = dotsync
        self.executor: Any = None

    def start_batches(self, size: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        if self.executor is not None:
            self.executor.shutdown()
        self.executor = ThreadPoolExecutor(max_workers=size)

    def batch(self) -> list[Any]:
        step, action = self.step, self.action
        futures = [self.executor.submit(step, s, action) for s in self.many]
        return [f.result() for f in futures]

    def mclose(self) -> dict[str, Any]:
        super().mclose()
        if self.executor is not None:
            self.executor.shutdown()
            self.executor = None
        return {"ok": True}

    def connect(self, url: str) -> Any:
        client = self.Client(base_url=url)
        if self.dotsync:
            client = client.sync()
        client.connect()
        return client

    def reset(self, s: Any) -> Any:
        return s.reset().observation

    def step(self, s: Any, action: dict[str, Any]) -> Any:
        return s.step(action).observation

    def close(self, s: Any) -> None:
        s.close()


class OursPool(SyncContender):
    """``openenv.sync.EnvPool``: N sessions, one ``pool.step(actions)`` per batch."""

    def __init__(self) -> None:
        super().__init__()
        from openenv.sync import EnvPool

        self.EnvPool = EnvPool
        self.pool: Any = None

    def mopen(self, url: str, size: int, message: str, warmup: int) -> dict[str, Any]:
        self.action = {"message": message}
        deadline = _retry_deadline()
        while True:
            pool = self.EnvPool(url, size=size)
            try:
                pool.__enter__()
                pool.reset()
                break
            except Exception:
                pool.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.pool, self.actions = pool, [self.action] * size
        for r in pool.step(self.actions):
            _check(r.observation, message, 0)
        for _ in range(warmup):
            pool.step(self.actions)
        return {"ok": True}

    def batches(self, n: int) -> dict[str, Any]:
        step, actions = self.pool.step, self.actions
        lat: list[int] = []
        gc.collect()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            step(actions)
            lat.append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9}

    def mclose(self) -> dict[str, Any]:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        return {"ok": True}

    def boot(self, image: str, size: int) -> dict[str, Any]:
        """``EnvPool.from_docker_image(image, size=N)``: entered and reset on all, then closed."""
        t0 = _now()
        pool = self.EnvPool.from_docker_image(image, size=size)
        pool.__enter__()
        try:
            results = pool.reset()
            t1 = _now()
        finally:
            pool.close()
        t2 = _now()
        if len(results) != size:
            raise RuntimeError(f"pool reset returned {len(results)} results, expected {size}")
        return _docker_times(t0, t1, t2, _left_by_label())


# ---------------------------------------------------------------------------
# async contenders
# ---------------------------------------------------------------------------


class AsyncContender:
    def __init__(self) -> None:
        self.session: Any = None
        self.action: dict[str, Any] = {}

    async def connect(self, url: str) -> Any: ...
    async def reset(self, s: Any) -> Any: ...
    async def step(self, s: Any, action: dict[str, Any]) -> Any: ...
    async def close(self, s: Any) -> None: ...

    async def _connect_reset(self, url: str) -> Any:
        deadline = _retry_deadline()
        while True:
            s = None
            try:
                s = await self.connect(url)
                await self.reset(s)
                return s
            except Exception:
                if s is not None:
                    try:
                        await self.close(s)
                    except Exception:
                        pass
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)

    async def open(self, url: str, message: str, warmup: int, blob: int) -> dict[str, Any]:
        self.action = {"message": message}
        s = await self._connect_reset(url)
        _check(await self.step(s, self.action), message, blob)
        for _ in range(warmup):
            await self.step(s, self.action)
        self.session = s
        return {"ok": True}

    async def steps(self, n: int) -> dict[str, Any]:
        s, action, step = self.session, self.action, self.step
        lat: list[int] = []
        append = lat.append
        gc.collect()
        s0 = _switches()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            await step(s, action)
            append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9, "switches": _switches() - s0}

    async def close_session(self) -> dict[str, Any]:
        if self.session is not None:
            await self.close(self.session)
            self.session = None
        return {"ok": True}

    async def setup(self, url: str, n: int) -> dict[str, Any]:
        lat: list[int] = []
        gc.collect()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            s = await self.connect(url)
            await self.reset(s)
            await self.close(s)
            lat.append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9}

    async def conc(self, url: str, sessions: int, steps: int, message: str) -> dict[str, Any]:
        action = {"message": message}
        opened = await asyncio.gather(*(self._connect_reset(url) for _ in range(sessions)))
        for s in opened:  # warm-up: one step each
            _check(await self.step(s, action), message, 0)
        lat: list[int] = []
        step = self.step

        async def drive(s: Any) -> None:
            append = lat.append
            for _ in range(steps):
                t = _now()
                await step(s, action)
                append(_now() - t)

        gc.collect()
        c0, w0 = _cpu(), _now()
        await asyncio.gather(*(drive(s) for s in opened))
        w1, c1 = _now(), _cpu()
        await asyncio.gather(*(self.close(s) for s in opened))
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9}


class ManyAsync:
    """Mixin: N sessions, a batch is ``asyncio.gather`` of one step on each."""

    many: list[Any]

    async def mopen(self, url: str, size: int, message: str, warmup: int) -> dict[str, Any]:
        self.action = {"message": message}  # type: ignore[attr-defined]
        self.many = list(await asyncio.gather(*(self._connect_reset(url) for _ in range(size))))  # type: ignore[attr-defined]
        for obs in await self.batch():
            _check(obs, message, 0)
        for _ in range(warmup):
            await self.batch()
        return {"ok": True}

    async def batch(self) -> list[Any]:
        step, action = self.step, self.action  # type: ignore[attr-defined]
        return list(await asyncio.gather(*(step(s, action) for s in self.many)))

    async def batches(self, n: int) -> dict[str, Any]:
        batch = self.batch
        lat: list[int] = []
        gc.collect()
        c0, w0 = _cpu(), _now()
        for _ in range(n):
            t = _now()
            await batch()
            lat.append(_now() - t)
        w1, c1 = _now(), _cpu()
        return {"lat": lat, "cpu": c1 - c0, "wall": (w1 - w0) / 1e9}

    async def mclose(self) -> dict[str, Any]:
        await asyncio.gather(*(self.close(s) for s in getattr(self, "many", [])))  # type: ignore[attr-defined]
        self.many = []
        return {"ok": True}


class OursAio(ManyAsync, AsyncContender):
    def __init__(self) -> None:
        super().__init__()
        from openenv.aio import Env

        self.Env = Env

    async def connect(self, url: str) -> Any:
        return await self.Env(url).connect()

    async def reset(self, s: Any) -> Any:
        return (await s.reset()).observation

    async def step(self, s: Any, action: dict[str, Any]) -> Any:
        return (await s.step(action)).observation

    async def close(self, s: Any) -> None:
        await s.close()

    async def docker(self, image: str) -> dict[str, Any]:
        t0 = _now()
        env = await self.Env.from_docker_image(image)
        await env.reset()
        t1 = _now()
        await env.close()
        t2 = _now()
        return _docker_times(t0, t1, t2, _left_by_label())


class RawAsync(AsyncContender):
    """The async floor: websockets.asyncio.client, the JSON exchange by hand."""

    def __init__(self) -> None:
        super().__init__()
        from websockets.asyncio.client import connect

        self._connect = connect

    async def connect(self, url: str) -> Any:
        return await self._connect(ws_url(url), **RAW_OPTIONS)

    async def reset(self, ws: Any) -> Any:
        await ws.send('{"type":"reset","data":{}}')
        return _reply(await ws.recv())

    async def step(self, ws: Any, action: dict[str, Any]) -> Any:
        await ws.send(json.dumps({"type": "step", "data": action}))
        return _reply(await ws.recv())

    async def close(self, ws: Any) -> None:
        await ws.send('{"type":"close"}')
        await ws.close()


class RelAwait(AsyncContender):
    """openenv 0.10.0 GenericEnvClient, every call awaited."""

    def __init__(self) -> None:
        super().__init__()
        from openenv import GenericEnvClient

        self.Client = GenericEnvClient

    async def connect(self, url: str) -> Any:
        client = self.Client(base_url=url)
        await client.connect()
        return client

    async def reset(self, s: Any) -> Any:
        return (await s.reset()).observation

    async def step(self, s: Any, action: dict[str, Any]) -> Any:
        return (await s.step(action)).observation

    async def close(self, s: Any) -> None:
        await s.close()

    async def docker(self, image: str) -> dict[str, Any]:
        t0 = _now()
        env = await self.Client.from_docker_image(image)
        await env.reset()
        t1 = _now()
        cid = env._provider._container_id  # private, read only to verify the removal
        await env.close()
        t2 = _now()
        return _docker_times(t0, t1, t2, _left_by_id(cid))


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _reply(raw: Any) -> dict[str, Any]:
    message = json.loads(raw)
    if message.get("type") != "observation":
        raise RuntimeError(f"unexpected reply: {str(raw)[:200]}")
    return message["data"]["observation"]


def _check(obs: Any, message: str, blob: int) -> None:
    """Sanity: every contender really got the echo (and the blob) back."""
    if not isinstance(obs, dict) or obs.get("echoed_message") != message:
        raise RuntimeError(f"bad observation: {str(obs)[:200]}")
    if blob and len(obs.get("blob", "")) != blob:
        raise RuntimeError(f"blob of {len(obs.get('blob', ''))} characters, expected {blob}")


def _docker_ps(*filters: str) -> list[str]:
    args = ["docker", "ps", "-aq"] + [a for f in filters for a in ("--filter", f)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, check=True).stdout
    return out.split()


def _left_by_label() -> int:
    return len(_docker_ps(f"label={LABEL_PID}={os.getpid()}"))


def _left_by_id(cid: str | None) -> int:
    return len(_docker_ps(f"id={cid}")) if cid else -1


def _docker_times(t0: int, t1: int, t2: int, left: int) -> dict[str, Any]:
    return {"ready": (t1 - t0) / 1e9, "close": (t2 - t1) / 1e9, "total": (t2 - t0) / 1e9, "left": left}


KINDS = {
    "ours-sync": lambda: OursSync(),
    "raw-sync": lambda: RawSync(),
    "rel-plain": lambda: RelSync(dotsync=False),
    "rel-dotsync": lambda: RelSync(dotsync=True),
    "ours-aio": lambda: OursAio(),
    "raw-async": lambda: RawAsync(),
    "rel-await": lambda: RelAwait(),
    "ours-pool": lambda: OursPool(),
}


def _send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _dispatch_sync(c: Any, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd["op"]
    if op == "open":
        return c.open(cmd["url"], cmd["message"], cmd["warmup"], cmd.get("blob", 0))
    if op == "steps":
        return c.steps(cmd["n"])
    if op == "close":
        return c.close_session()
    if op == "setup":
        return c.setup(cmd["url"], cmd["n"])
    if op == "docker":
        return c.docker(cmd["image"])
    if op == "mopen":
        return c.mopen(cmd["url"], cmd["size"], cmd["message"], cmd["warmup"])
    if op == "batches":
        return c.batches(cmd["n"])
    if op == "mclose":
        return c.mclose()
    if op == "boot":
        return c.boot(cmd["image"], cmd["size"])
    raise ValueError(f"unknown op {op!r}")


async def _dispatch_async(c: Any, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd["op"]
    if op == "open":
        return await c.open(cmd["url"], cmd["message"], cmd["warmup"], cmd.get("blob", 0))
    if op == "steps":
        return await c.steps(cmd["n"])
    if op == "close":
        return await c.close_session()
    if op == "setup":
        return await c.setup(cmd["url"], cmd["n"])
    if op == "conc":
        return await c.conc(cmd["url"], cmd["sessions"], cmd["steps"], cmd["message"])
    if op == "docker":
        return await c.docker(cmd["image"])
    if op == "mopen":
        return await c.mopen(cmd["url"], cmd["size"], cmd["message"], cmd["warmup"])
    if op == "batches":
        return await c.batches(cmd["n"])
    if op == "mclose":
        return await c.mclose()
    raise ValueError(f"unknown op {op!r}")


def main_sync(c: Any) -> None:
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            c.close_session()
            if hasattr(c, "mclose"):
                c.mclose()
            return
        try:
            _send(_dispatch_sync(c, cmd))
        except Exception as exc:
            _send({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})


async def main_async(c: Any) -> None:
    loop = asyncio.get_running_loop()
    # read commands in a thread so the loop keeps running (and answering pings) in between
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        try:
            _send(await _dispatch_async(c, cmd))
        except Exception as exc:
            _send({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})
    await c.close_session()
    if hasattr(c, "mclose"):
        await c.mclose()


def main() -> None:
    kind = sys.argv[1]
    contender = KINDS[kind]()
    import websockets

    _send({"ready": kind, "pid": os.getpid(), "websockets": websockets.__version__})
    if isinstance(contender, AsyncContender):
        asyncio.run(main_async(contender))
    else:
        main_sync(contender)


if __name__ == "__main__":
    main()
