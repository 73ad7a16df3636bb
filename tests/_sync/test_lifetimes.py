# GENERATED from tests/_async/test_lifetimes.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Nothing a client starts outlives the program: exit without close, SIGKILL, and the socket handed to the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from openenv._sync.providers import ProcessProvider
from openenv._blocking import process_registry, procfs

from ..leaks import servers_in

HERE = Path(__file__).resolve().parent.parent
CHILD = HERE / "lifetime_child.py"
ECHO_IMAGE = "openenv-test/echo:latest"
#: the flavour of the child program (the generator turns it into "sync")
FLAVOUR = "sync"


def _gone(pid: int, start: int) -> bool:
    return procfs.process_start_time(pid) != start


def _poll(condition: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def _container_gone(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.api.inspect_container(name)
    except docker.errors.NotFound:
        return True
    return False


def _run_child(
    kind: str, target: str, mode: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), FLAVOUR, kind, target, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        _, err = proc.communicate(timeout=60)
        raise AssertionError(f"the child failed:\n{err.decode()[-3000:]}")
    return proc, json.loads(line)


def _finish(proc: subprocess.Popen[bytes]) -> bytes:
    # returns once every holder of the child's stdout/stderr is gone: neither the
    # server nor the reaper may keep them open
    _, err = proc.communicate(timeout=60)
    return err


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, process_registry.RUNTIME_DIR_ENV: str(tmp_path / "registry")}


def test_a_server_never_closed_is_stopped_at_exit(tmp_path: Path, child_env: dict[str, str]) -> None:
    proc, info = _run_child("process", str(tmp_path), "exit", child_env)
    err = _finish(proc)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert _gone(info["pid"], info["start"])  # stopped before the interpreter ended
    assert _poll(lambda: procfs.process_start_time(info["reaper"]) is None)  # the reaper left too
    assert os.listdir(tmp_path / "registry") == []


def test_a_server_of_a_killed_program_is_removed(tmp_path: Path, child_env: dict[str, str]) -> None:
    proc, info = _run_child("process", str(tmp_path), "hang", child_env)
    assert not _gone(info["pid"], info["start"])
    assert len(os.listdir(tmp_path / "registry")) == 1
    proc.send_signal(signal.SIGKILL)
    _finish(proc)
    assert _poll(lambda: _gone(info["pid"], info["start"])), "the reaper did not end the server"
    assert _poll(lambda: procfs.process_start_time(info["reaper"]) is None)
    assert _poll(lambda: os.listdir(tmp_path / "registry") == [])


def test_a_server_of_a_terminated_program_is_removed(tmp_path: Path, child_env: dict[str, str]) -> None:
    proc, info = _run_child("process", str(tmp_path), "hang", child_env)
    proc.send_signal(signal.SIGTERM)  # no handler: the interpreter dies without atexit
    _finish(proc)
    assert _poll(lambda: _gone(info["pid"], info["start"])), "the reaper did not end the server"


@pytest.mark.docker
def test_a_container_never_closed_is_removed_at_exit(docker_engine: Any, child_env: dict[str, str]) -> None:
    proc, info = _run_child("docker", ECHO_IMAGE, "exit", child_env)
    err = _finish(proc)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert _container_gone(docker_engine, info["container"])


@pytest.mark.docker
def test_a_container_of_a_killed_program_is_removed(docker_engine: Any, child_env: dict[str, str]) -> None:
    proc, info = _run_child("docker", ECHO_IMAGE, "hang", child_env)
    assert not _container_gone(docker_engine, info["container"])
    proc.send_signal(signal.SIGKILL)
    _finish(proc)
    assert _poll(lambda: _container_gone(docker_engine, info["container"]), timeout=60)


FD_SERVER = """
import http.server, socket, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
class Quiet(http.server.HTTPServer):
    def handle_error(self, request, client_address):
        pass  # a readiness poll that gave up mid-answer (BrokenPipe): its traceback would crowd the log tail
server = Quiet(("127.0.0.1", 0), Health, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=int(sys.argv[1]))
print("serving on", server.socket.getsockname(), flush=True)
server.serve_forever()
"""


def test_the_listening_socket_is_handed_to_the_server() -> None:
    provider = ProcessProvider([sys.executable, "-c", FD_SERVER, "{fd}"])
    try:
        url = provider.start()
        port = provider.port
        assert port and url == f"http://127.0.0.1:{port}"
        provider.wait_until_ready(url, 30)
        assert f"'127.0.0.1', {port}" in provider.logs()
    finally:
        provider.stop()
    # the parent closed its copy: once the server is gone, nothing listens there
    import socket

    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))


def test_a_taken_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    import socket

    from openenv.sync import ProviderError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        provider = ProcessProvider([sys.executable, "-c", FD_SERVER, "{fd}"], port=port, cwd=str(tmp_path))
        with pytest.raises(ProviderError, match="cannot listen on 127.0.0.1"):
            provider.start()
        assert servers_in(tmp_path) == set()  # no process was started
        provider.stop()
