"""Soak: many concurrent sessions of both twins against one embedded server in its own process.

32 ``openenv.aio`` sessions on one event loop and 16 threads of ``openenv.sync`` clients
each run ``steps`` echo steps whose messages carry a per-session token; a reply carrying
another session's token is cross-talk and fails the run. RSS, open file descriptors and
threads of the client (this process) and of the server (a ``python -m openenv serve``
child) are read from ``/proc`` before, during (peak) and after, and held within bounds.

Short form: ``tests/test_soak.py`` (normal suite). Long form: ``nox -s soak``, which runs
``python -m tests.soak --steps 3000 --markdown bench/SOAK.md``. Bounded in time: every
run stops by itself (``--budget`` seconds, default 600).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ASYNC_SESSIONS = 32
SYNC_THREADS = 16

#: Bounds held after every client closed (and, for RSS, over the whole run).
THREAD_SLACK = 2
FD_SLACK = 4
SERVER_RSS_GROWTH_MB = 64.0
CLIENT_RSS_GROWTH_MB = 96.0
#: anyio's default thread limiter: the most worker threads an ASGI server keeps
ANYIO_WORKERS = 40


@dataclass
class Usage:
    rss_mb: float
    fds: int
    threads: int

    def __str__(self) -> str:
        return f"{self.rss_mb:.1f} MB / {self.fds} fds / {self.threads} thr"


def usage(pid: int | str = "self") -> Usage:
    """RSS, open descriptors and threads of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return Usage(rss / 1024, fds, threads)


@dataclass
class Report:
    steps: int = 0
    errors: list[str] = field(default_factory=list)
    cross_talk: int = 0
    seconds: float = 0.0
    transport: str = "embedded"
    #: threads each process may keep after close
    thread_slack: dict[str, int] = field(default_factory=lambda: {"server": THREAD_SLACK, "client": THREAD_SLACK})
    client: dict[str, Usage] = field(default_factory=dict)
    server: dict[str, Usage] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, steps: int, errors: list[str], cross_talk: int) -> None:
        with self.lock:
            self.steps += steps
            self.errors.extend(errors)
            self.cross_talk += cross_talk

    def violations(self) -> list[str]:
        """Every bound the run broke (empty: it passed)."""
        out = [f"{len(self.errors)} errors, first: {self.errors[0]}"] if self.errors else []
        if self.cross_talk:
            out.append(f"{self.cross_talk} replies carried another session's token")
        for who, use, rss_bound in (
            ("server", self.server, SERVER_RSS_GROWTH_MB),
            ("client", self.client, CLIENT_RSS_GROWTH_MB),
        ):
            before, after, peak = use["before"], use["after"], use["during"]
            slack = self.thread_slack[who]
            if after.threads > before.threads + slack:
                out.append(f"{who} threads {before.threads} -> {after.threads} after close (slack {slack})")
            if after.fds > before.fds + FD_SLACK:
                out.append(f"{who} fds {before.fds} -> {after.fds} after close (slack {FD_SLACK})")
            growth = max(peak.rss_mb, after.rss_mb) - before.rss_mb
            if growth > rss_bound:
                out.append(f"{who} RSS grew {growth:.1f} MB (bound {rss_bound} MB)")
        return out

    def table(self, steps_per_session: int) -> str:
        sessions = ASYNC_SESSIONS + SYNC_THREADS
        lines = [
            f"Soak: {ASYNC_SESSIONS} async sessions (openenv.aio, one loop) + {SYNC_THREADS} sync threads "
            f"(openenv.sync), {steps_per_session} steps each, one {self.transport} echo server in its own process.",
            "",
            "| measure | value |",
            "| --- | --- |",
            f"| steps | {self.steps} of {sessions * steps_per_session} |",
            f"| wall time | {self.seconds:.1f} s |",
            f"| steps/s (all sessions) | {self.steps / self.seconds if self.seconds else 0:.0f} |",
            f"| cross-talk replies | {self.cross_talk} |",
            f"| errors | {len(self.errors)} |",
            "",
            "| process | before | during (peak) | after close |",
            "| --- | --- | --- | --- |",
        ]
        for who, use in (("server", self.server), ("client", self.client)):
            lines.append(f"| {who} | {use['before']} | {use['during']} | {use['after']} |")
        lines += [
            "",
            f"Bounds: after close, threads within +{self.thread_slack['server']} (server) and "
            f"+{self.thread_slack['client']} (client) and fds within +{FD_SLACK} of before; "
            f"RSS growth at most {SERVER_RSS_GROWTH_MB:.0f} MB (server) and {CLIENT_RSS_GROWTH_MB:.0f} MB (client).",
            "Result: " + ("PASS" if not self.violations() else "FAIL: " + "; ".join(self.violations())),
        ]
        return "\n".join(lines)


def _peak(a: Usage, b: Usage) -> Usage:
    return Usage(max(a.rss_mb, b.rss_mb), max(a.fds, b.fds), max(a.threads, b.threads))


def _read_lines(stream: Any, lines: queue.Queue[str]) -> None:
    """Put each line of ``stream`` on ``lines`` (``""`` at its end), until it closes."""
    try:
        for line in stream:
            lines.put(line)
    except (OSError, ValueError):  # closed under us at the end
        pass
    lines.put("")


def start_server(
    factory: str = "echo", *, asgi: bool = False, args: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[str], str]:
    """``python -m openenv serve echo`` (``--asgi``: under uvicorn) on an ephemeral 127.0.0.1 port; (process, URL)."""
    sessions = str(ASYNC_SESSIONS + SYNC_THREADS + 8)
    command = [sys.executable, "-m", "openenv", "serve", factory, "--port", "0", "--max-sessions", sessions, *args]
    proc = subprocess.Popen(
        command + ["--asgi"] if asgi else command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stderr, lines), daemon=True).start()  # never block the server
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        match = re.search(r"serving \S+ on (http://\S+)", line)
        if match:
            return proc, match.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    proc.wait()
    raise RuntimeError("the soak server did not start")


def _check(reply: Any, token: str, i: int, tokens: set[str]) -> tuple[int, str | None]:
    """(cross-talk count, error) of one echo reply."""
    echoed = reply.observation["echoed_message"]
    expected = f"{token}:{i}"
    if echoed == expected:
        return 0, None
    other = echoed.split(":", 1)[0]
    if other in tokens and other != token:
        return 1, f"session {token[:8]} got a reply of session {other[:8]}"
    return 0, f"session {token[:8]} step {i}: expected {expected!r}, got {echoed!r:.80}"


def _sync_worker(url: str, steps: int, tokens: set[str], report: Report, deadline: float) -> None:
    from openenv.sync import Env

    token = uuid.uuid4().hex
    tokens.add(token)
    done, errors, cross = 0, [], 0
    try:
        with Env(url) as env:
            env.reset()
            for i in range(steps):
                if time.monotonic() > deadline:
                    errors.append("time budget spent")
                    break
                c, err = _check(env.step({"message": f"{token}:{i}"}), token, i, tokens)
                cross += c
                if err:
                    errors.append(err)
                done += 1
    except Exception as exc:
        errors.append(f"sync session: {type(exc).__name__}: {exc}")
    report.record(done, errors, cross)


async def _async_main(url: str, steps: int, tokens: set[str], report: Report, deadline: float) -> None:
    from openenv.aio import Env

    async def one() -> None:
        token = uuid.uuid4().hex
        tokens.add(token)
        done, errors, cross = 0, [], 0
        try:
            async with Env(url) as env:
                await env.reset()
                for i in range(steps):
                    if time.monotonic() > deadline:
                        errors.append("time budget spent")
                        break
                    c, err = _check(await env.step({"message": f"{token}:{i}"}), token, i, tokens)
                    cross += c
                    if err:
                        errors.append(err)
                    done += 1
        except Exception as exc:
            errors.append(f"async session: {type(exc).__name__}: {exc}")
        report.record(done, errors, cross)

    await asyncio.gather(*(one() for _ in range(ASYNC_SESSIONS)))


def _settle(pid: int, before: Usage, thread_slack: int, timeout: float = 10.0) -> Usage:
    """Usage of ``pid`` once threads and fds came back near ``before`` (or the timeout passed)."""
    end = time.monotonic() + timeout
    now = usage(pid)
    while time.monotonic() < end:
        now = usage(pid)
        if now.threads <= before.threads + thread_slack and now.fds <= before.fds + FD_SLACK:
            break
        time.sleep(0.05)
    return now


def run(steps: int, budget: float = 600.0, *, asgi: bool = False) -> Report:
    """Run the soak (``asgi``: against ``serve --asgi``); the report holds the figures and :meth:`Report.violations`."""
    report = Report(transport="ASGI (uvicorn)" if asgi else "embedded")
    if asgi:  # anyio keeps idle worker threads (Starlette's run_in_threadpool) until its next call
        report.thread_slack["server"] = THREAD_SLACK + ANYIO_WORKERS
    proc, url = start_server(asgi=asgi)
    try:
        import openenv.aio  # noqa: F401 - imported before the baseline is taken
        import openenv.sync  # noqa: F401

        time.sleep(0.2)
        report.server["before"] = usage(proc.pid)
        report.client["before"] = usage()
        report.server["during"] = report.server["before"]
        report.client["during"] = report.client["before"]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.1):
                report.server["during"] = _peak(report.server["during"], usage(proc.pid))
                report.client["during"] = _peak(report.client["during"], usage())

        sampler = threading.Thread(target=sample, name="soak-sampler")
        sampler.start()
        tokens: set[str] = set()
        deadline = time.monotonic() + budget
        started = time.monotonic()
        loop_thread = threading.Thread(
            target=lambda: asyncio.run(_async_main(url, steps, tokens, report, deadline)), name="soak-aio"
        )
        workers = [
            threading.Thread(target=_sync_worker, args=(url, steps, tokens, report, deadline), name=f"soak-sync-{n}")
            for n in range(SYNC_THREADS)
        ]
        loop_thread.start()
        for worker in workers:
            worker.start()
        for thread in [loop_thread, *workers]:
            thread.join()
        report.seconds = time.monotonic() - started
        stop.set()
        sampler.join()
        report.server["after"] = _settle(proc.pid, report.server["before"], report.thread_slack["server"])
        report.client["after"] = _settle(os.getpid(), report.client["before"], THREAD_SLACK)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=3000, help="steps per session (default: 3000)")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds before the run stops itself")
    parser.add_argument("--markdown", type=Path, help="also write the table to this Markdown file")
    parser.add_argument("--asgi", action="store_true", help="soak the ASGI server (serve --asgi) instead")
    args = parser.parse_args(argv)
    report = run(args.steps, args.budget, asgi=args.asgi)
    table = report.table(args.steps)
    print(table)
    if args.markdown:
        args.markdown.write_text("# Soak run\n\n" + table + "\n")
    return 1 if report.violations() else 0


if __name__ == "__main__":
    sys.exit(main())
