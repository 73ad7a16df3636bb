# GENERATED from tests/_async/test_providers.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Local-process bootstrap: ``from_provider`` and ``from_env`` with no Docker, in both twins."""

from __future__ import annotations

import http.server
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from openenv._sync.providers import ProcessProvider, ServerProvider
from openenv.sync import ConnectError, Env, InvalidURL, ProviderError, ReadinessTimeout

from ..leaks import alive, servers_in


def test_from_provider_runs_and_stops_a_local_server(tmp_path: Path) -> None:
    provider = ProcessProvider.for_environment("echo", max_sessions=2, cwd=str(tmp_path))
    with Env.from_provider(provider, ready_timeout=30) as env:
        assert env.connected
        assert env.base_url.startswith("http://127.0.0.1:")
        env.reset()
        assert (env.step({"message": "local"})).observation["echoed_message"] == "local"
        (server,) = servers_in(tmp_path)
    assert not alive(server) and servers_in(tmp_path) == set()


def test_for_environment_hands_its_server_a_socket_that_listens_from_the_start(tmp_path: Path) -> None:
    """``for_environment`` binds the port itself and hands the socket down (``serve --fd``).

    No other program can take the port before the server listens, and a connect is queued from the moment
    ``start()`` returns, before the server's interpreter is up (with ``--port``, it was refused until then).
    """
    provider = ProcessProvider.for_environment("echo", cwd=str(tmp_path))
    url = provider.start()
    try:
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=5):
            pass
        with Env(url, connect_timeout=60) as env:
            env.reset()
            assert (env.step({"message": "fd"})).observation["echoed_message"] == "fd"
    finally:
        provider.stop()
    assert servers_in(tmp_path) == set()


def test_a_process_that_dies_on_start_says_why(tmp_path: Path) -> None:
    code = "import sys; print('fatal: cannot load environment', file=sys.stderr); sys.exit(3)"
    provider = ProcessProvider([sys.executable, "-c", code], cwd=str(tmp_path))
    with pytest.raises(ProviderError) as info:
        Env.from_provider(provider, ready_timeout=30)
    message = str(info.value)
    assert "exited with code 3" in message
    assert "fatal: cannot load environment" in message
    assert servers_in(tmp_path) == set()


def test_a_server_that_never_becomes_ready_is_stopped(tmp_path: Path) -> None:
    # a shell, not a Python child: a loaded CI machine took longer than the wait to start Python and
    # print, and the logs under test were still empty
    provider = ProcessProvider(["/bin/sh", "-c", "echo sleeping; exec sleep 60"], cwd=str(tmp_path))
    with pytest.raises(ReadinessTimeout) as info:
        Env.from_provider(provider, ready_timeout=2.5)
    assert isinstance(info.value, TimeoutError)
    assert "did not become healthy within 2.5 s" in str(info.value)
    assert "sleeping" in info.value.logs
    assert servers_in(tmp_path) == set()


class _SlowUnhealthy(http.server.BaseHTTPRequestHandler):
    """Answers every request 503 after 0.2 s: longer than the last poll of a wait gets (see below)."""

    def do_GET(self) -> None:
        time.sleep(0.2)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_wait_for_an_unhealthy_server_names_its_answer_not_the_timeout_of_a_poll_cut_short() -> None:
    # the backoff sleeps until the deadline, so the wait's last poll gets milliseconds and times out
    # (every time here: the server takes 0.2 s to answer); the error names the server's answer before it
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowUnhealthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ReadinessTimeout) as info:
            ServerProvider().wait_until_ready(url, 3.0)
        assert str(info.value) == f"{url} did not become healthy within 3.0 s (last: HTTP 503)"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_from_env_runs_a_local_checkout(tmp_path: Path) -> None:
    (tmp_path / "my_counter.py").write_text(
        textwrap.dedent(
            """
            from openenv.server.echo import EchoEnvironment

            class LoudEcho(EchoEnvironment):
                def step(self, action):
                    action.message = action.message.upper()
                    return super().step(action)
            """
        )
    )
    command = [sys.executable, "-m", "openenv", "serve", "my_counter:LoudEcho", "--host", "{host}", "--port", "{port}"]
    with Env.from_env(str(tmp_path), command=command, ready_timeout=30) as env:
        env.reset()
        assert (env.step({"message": "quiet"})).observation["echoed_message"] == "QUIET"


def test_from_env_with_a_url_connects(echo_server: Any) -> None:
    with Env.from_env(echo_server.url + "/", message_timeout=5) as env:
        assert env.connected and env.base_url == echo_server.url
        env.reset()


def test_from_env_refuses_what_it_cannot_name() -> None:
    with pytest.raises(InvalidURL, match="Space id"):
        Env.from_env("not a thing")


class FailingProvider(ServerProvider):
    """A provider whose server answers but whose connect fails: stop must still run."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stopped = 0

    def start(self) -> str:
        return self.url

    def wait_until_ready(self, base_url: str, timeout: Any) -> None:
        return None

    def stop(self) -> None:
        self.stopped += 1


def test_from_provider_stops_the_provider_when_connect_fails(free_port: int) -> None:
    provider = FailingProvider(f"http://127.0.0.1:{free_port}")
    with pytest.raises(ConnectError, match="refused"):
        Env.from_provider(provider)
    assert provider.stopped == 1


def test_closing_the_client_stops_its_provider(echo_server: Any) -> None:
    provider = FailingProvider(echo_server.url)
    env = Env.from_provider(provider)
    env.reset()
    env.close()
    env.close()
    assert provider.stopped == 1
