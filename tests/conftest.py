"""Fixtures shared by every suite: real servers on 127.0.0.1, in threads, never on a test's event loop."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment

from .envs import CounterEnv, ScriptServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def echo_server() -> Iterator[EnvServer]:
    with EnvServer(EchoEnvironment, host="127.0.0.1", port=0, max_sessions=64) as server:
        yield server


@pytest.fixture(scope="session")
def counter_server() -> Iterator[EnvServer]:
    with EnvServer(CounterEnv, host="127.0.0.1", port=0, max_sessions=64) as server:
        yield server


@pytest.fixture
def server_factory() -> Iterator[Callable[..., EnvServer]]:
    """Start extra servers (stopped at the end of the test): ``server_factory(CounterEnv, max_sessions=1)``."""
    started: list[EnvServer] = []

    def start(factory: Any = CounterEnv, **kwargs: Any) -> EnvServer:
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        server = EnvServer(factory, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture
def script_server() -> Iterator[Callable[[Callable[[str], Any]], ScriptServer]]:
    """Start raw WebSocket servers that answer frames with a script."""
    started: list[ScriptServer] = []

    def start(reply: Callable[[str], Any]) -> ScriptServer:
        server = ScriptServer(reply)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ECHO_IMAGE = "openenv-test/echo:latest"


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A docker-py client of a live engine with the test images; skipped without one (failed under CI).

    ``python3 scripts/docker_setup.py`` (run by ``nox -s docker``) starts the
    engine and builds the images.  At the end, no container labelled
    ``org.openenv.managed=1`` may be left.
    """
    import os

    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
        client.images.get(ECHO_IMAGE)
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable engine
        if os.environ.get("CI"):
            pytest.fail(f"no usable Docker engine under CI: {exc}")
        pytest.skip(f"no usable Docker engine ({exc}); run python3 scripts/docker_setup.py")
    yield client
    left = client.containers.list(all=True, filters={"label": "org.openenv.managed=1"})
    ours = [c.name for c in left if c.labels.get("org.openenv.pid") == str(os.getpid())]
    for container in left:
        if container.name in ours:
            container.remove(force=True)
    client.close()
    assert ours == [], f"containers left behind: {ours}"
