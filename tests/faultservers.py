"""Servers for the fault suites: a raw scripted WebSocket server, and the embedded server in its own process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.sync.server import Server, ServerConnection, serve

from . import leaks

ROOT = Path(__file__).resolve().parent.parent

#: ``script(ws, frame, n)``: does whatever the test says with the ``n``-th frame (from 0) of the server
Script = Callable[[ServerConnection, str, int], None]


class RawServer:
    """A raw WebSocket server on 127.0.0.1 that hands every received frame to ``script``."""

    def __init__(self, script: Script, max_size: int | None = None) -> None:
        self.script = script
        self.frames = 0
        self.sent = 0
        self._server: Server = serve(self._handler, "127.0.0.1", 0, max_size=max_size, compression=None)
        self._thread = threading.Thread(target=self._server.serve_forever, name="rawserver", daemon=True)
        self._thread.start()
        self.port: int = self._server.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def _handler(self, ws: ServerConnection) -> None:
        try:
            for message in ws:
                n, self.frames = self.frames, self.frames + 1
                self.script(ws, message if isinstance(message, str) else message.decode("latin-1"), n)
        except Exception:
            pass

    def close(self) -> None:
        """Stop serving (idempotent); its connections end with it."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)


def reply(ws: ServerConnection, frame: str, **observation: Any) -> None:
    """Send the well-formed reply to ``frame``; the observation echoes the request (``seed``, ``delta``)."""
    message = json.loads(frame)
    data = message.get("data") or {}
    if message["type"] == "state":
        ws.send(json.dumps({"type": "state", "data": {"episode_id": "e", "step_count": 0}}))
        return
    echo = {"seed": data.get("seed"), "delta": data.get("delta"), **observation}
    ws.send(json.dumps({"type": "observation", "data": {"observation": echo, "reward": 0.0, "done": False}}))


def cut_tcp(ws: ServerConnection) -> None:
    """End the TCP connection without a close frame."""
    try:
        ws.socket.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


READY = re.compile(r"serving .* on http://127\.0\.0\.1:(\d+)\r?\n")


class ServerProcess:
    """``python -m openenv serve tests.envs:CounterEnv`` in its own process, on 127.0.0.1.

    ``kill()`` sends SIGKILL; ``start()`` again serves on the same port.
    """

    def __init__(self, factory: str = "tests.envs:CounterEnv", max_sessions: int = 8, *args: str) -> None:
        self.factory = factory
        self.max_sessions = max_sessions
        self.args = args
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        command = [sys.executable, "-m", "openenv", "serve", self.factory, "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--max-sessions", str(self.max_sessions), *self.args]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        deadline = time.monotonic() + timeout
        while True:  # the port of a killed server may take a moment to be free again
            # the server prints "serving ... on URL" to stderr, through the same open file as ours (one
            # shared offset: TemporaryFile's "a+" does not set O_APPEND on the fd mkstemp made, so a
            # seek(0) here made the child's next write land at the start, over the line we look for:
            # "\nerving CounterEnv on ..." under load).  os.pread reads without moving that offset.
            log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
            text = ""
            while self.proc.poll() is None and time.monotonic() < deadline:
                text = os.pread(log.fileno(), 1 << 20, 0).decode("utf-8", "replace")
                if READY.search(text):  # the whole line, newline included: not a write half read
                    break
                time.sleep(0.02)
            log.close()
            match = READY.search(text)
            if match:
                self.port = int(match.group(1))
                leaks.EXPECTED_CHILDREN.add(self.proc.pid)
                return self
            self.kill()
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not start: {text[-2000:]!r}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)
            leaks.EXPECTED_CHILDREN.discard(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(2)  # a step still sleeping in the server would hold it longer
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            leaks.EXPECTED_CHILDREN.discard(self.proc.pid)
