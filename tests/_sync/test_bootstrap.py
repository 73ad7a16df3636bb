# GENERATED from tests/_async/test_bootstrap.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``start_providers``: N servers start at once, fail together, and leave nothing behind, in both twins."""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv._sync.bootstrap import start_providers
from openenv._sync.providers import DockerProvider, ProcessProvider
from openenv.sync import BootstrapError, ContainerExited, Env, ProviderError, ReadinessTimeout

from ..helpers_sync import run_in_thread
from ..leaks import alive, servers_in

ECHO = "openenv-test/echo:latest"
EXITS = "openenv-test/exits:latest"
REGISTRY = os.environ.get("OPENENV_TEST_REGISTRY", "127.0.0.1:5000")


class Recorder:
    """A provider of an already-running server that records the order of the calls it gets.

    Its ``start`` waits on a shared barrier (through ``run_in_thread``): it
    returns only if every provider of the barrier is starting at the same time.
    """

    def __init__(
        self,
        url: str,
        events: list[tuple[str, int]],
        index: int,
        barrier: threading.Barrier | None = None,
        fail_start: BaseException | None = None,
        fail_wait: BaseException | None = None,
        fail_stop: BaseException | None = None,
    ) -> None:
        self.url = url
        self.events = events
        self.index = index
        self.barrier = barrier
        self.fail_start = fail_start
        self.fail_wait = fail_wait
        self.fail_stop = fail_stop
        self.stopped = 0

    def start(self) -> str:
        self.events.append(("start", self.index))
        if self.barrier is not None:
            run_in_thread(self.barrier.wait)
        if self.fail_start is not None:
            raise self.fail_start
        return self.url

    def wait_until_ready(self, base_url: str, timeout: float | None) -> None:
        assert base_url == self.url
        self.events.append(("wait", self.index))
        if self.fail_wait is not None:
            raise self.fail_wait

    def stop(self) -> None:
        self.stopped += 1
        if self.fail_stop is not None:
            raise self.fail_stop


def _echo_providers(n: int, where: Path) -> list[ProcessProvider]:
    """``n`` echo servers, run in ``where`` (so that ``servers_in(where)`` finds them)."""
    return [ProcessProvider.for_environment("echo", cwd=str(where)) for _ in range(n)]


def _stop(providers: list[Any]) -> None:
    for provider in providers:
        provider.stop()


def test_three_local_servers_start_and_their_urls_keep_the_order(tmp_path: Path) -> None:
    providers = _echo_providers(3, tmp_path)
    try:
        urls = start_providers(providers, 30)
        assert urls == [f"http://127.0.0.1:{p.port}" for p in providers]
        assert len(set(urls)) == 3
        for url in urls:
            with Env(url) as env:
                env.reset()
                assert (env.step({"message": url})).observation["echoed_message"] == url
        servers = servers_in(tmp_path)
        assert len(servers) == 3
    finally:
        _stop(providers)
    assert not any(alive(pid) for pid in servers) and servers_in(tmp_path) == set()


def test_every_start_begins_before_any_wait_and_the_starts_overlap(echo_server: Any) -> None:
    events: list[tuple[str, int]] = []
    barrier = threading.Barrier(3, timeout=20)  # broken (an error) unless the three starts run at once
    providers = [Recorder(echo_server.url, events, i, barrier) for i in range(3)]
    assert start_providers(providers, 10) == [echo_server.url] * 3
    assert sorted(events[:3]) == [("start", 0), ("start", 1), ("start", 2)]
    assert sorted(events[3:]) == [("wait", 0), ("wait", 1), ("wait", 2)]
    assert [p.stopped for p in providers] == [0, 0, 0]


def test_the_readiness_waits_overlap(echo_server: Any) -> None:
    events: list[tuple[str, int]] = []
    barrier = threading.Barrier(3, timeout=20)

    class Waits(Recorder):
        def wait_until_ready(self, base_url: str, timeout: float | None) -> None:
            super().wait_until_ready(base_url, timeout)
            run_in_thread(barrier.wait)  # passes only if the three waits run at once

    providers = [Waits(echo_server.url, events, i) for i in range(3)]
    assert start_providers(providers, 10) == [echo_server.url] * 3


def test_one_failed_start_of_three_stops_the_others_and_says_which(tmp_path: Path) -> None:
    providers: list[Any] = _echo_providers(3, tmp_path)
    events: list[tuple[str, int]] = []
    providers[1] = Recorder("http://127.0.0.1:9", events, 1, fail_start=ProviderError("no capacity left in zone b"))
    with pytest.raises(BootstrapError) as info:
        start_providers(providers, 30)
    error = info.value
    assert isinstance(error, ProviderError)
    assert list(error.failures) == [1]
    assert str(error.failures[1]) == "no capacity left in zone b"
    assert "[1] ProviderError: no capacity left in zone b" in str(error)
    assert "1 of 3 servers failed" in str(error)
    assert providers[1].stopped == 1
    assert servers_in(tmp_path) == set()  # the other two were stopped: their processes are gone


def test_a_server_that_dies_while_the_others_come_up_is_named_with_its_output(tmp_path: Path) -> None:
    code = "import sys; print('fatal: cannot load environment', file=sys.stderr); sys.exit(3)"
    providers = _echo_providers(3, tmp_path)
    providers[1] = ProcessProvider([sys.executable, "-c", code], cwd=str(tmp_path))
    with pytest.raises(BootstrapError) as info:
        start_providers(providers, 30)
    assert list(info.value.failures) == [1]
    message = str(info.value)
    assert "[1] ProviderError:" in message and "exited with code 3" in message
    assert "fatal: cannot load environment" in message
    assert servers_in(tmp_path) == set()


def test_every_failure_is_listed_with_the_logs_the_provider_gave(echo_server: Any) -> None:
    events: list[tuple[str, int]] = []
    timeout = ReadinessTimeout("http://127.0.0.1:1 did not become healthy within 1.0 s", "booting...\nstill booting")
    providers = [
        Recorder(echo_server.url, events, 0, fail_wait=timeout),
        Recorder(echo_server.url, events, 1),
        Recorder(echo_server.url, events, 2, fail_wait=ValueError("bad config")),
    ]
    with pytest.raises(BootstrapError) as info:
        start_providers(providers, 10)
    assert info.value.failures == {0: timeout, 2: providers[2].fail_wait}
    message = str(info.value)
    assert "2 of 3 servers failed" in message
    assert "[0] ReadinessTimeout: http://127.0.0.1:1 did not become healthy" in message
    assert "still booting" in message
    assert "[2] ValueError: bad config" in message
    assert info.value.__cause__ is timeout
    assert [p.stopped for p in providers] == [1, 1, 1]


def test_a_stop_that_raises_does_not_keep_the_others_running(tmp_path: Path) -> None:
    providers: list[Any] = _echo_providers(3, tmp_path)
    events: list[tuple[str, int]] = []
    providers[0] = Recorder(
        "http://127.0.0.1:9", events, 0, fail_wait=ProviderError("never ready"), fail_stop=RuntimeError("stop broke")
    )
    with pytest.raises(BootstrapError) as info:
        start_providers(providers, 30)
    assert list(info.value.failures) == [0]
    assert providers[0].stopped == 1
    assert servers_in(tmp_path) == set()  # providers 1 and 2 were stopped


def test_a_single_provider_raises_its_own_error_unchanged() -> None:
    events: list[tuple[str, int]] = []
    failure = ContainerExited("c1", 3, "boom")
    provider = Recorder("http://127.0.0.1:9", events, 0, fail_wait=failure)
    with pytest.raises(ContainerExited) as info:
        start_providers([provider], 10)
    assert info.value is failure
    assert provider.stopped == 1


def test_a_single_server_that_never_gets_ready_is_a_readiness_timeout(tmp_path: Path) -> None:
    provider = ProcessProvider([sys.executable, "-c", "import time; time.sleep(60)"], cwd=str(tmp_path))
    with pytest.raises(ReadinessTimeout, match="did not become healthy within 0.3 s"):
        start_providers([provider], 0.3)
    assert servers_in(tmp_path) == set()


def test_no_providers_start_nothing() -> None:
    assert start_providers([], 10) == []


# --------------------------------------------------------------------------- docker


def _ours(engine: Any) -> list[Any]:
    mine = str(os.getpid())
    found = engine.containers.list(all=True, filters={"label": ["org.openenv.managed=1", f"org.openenv.pid={mine}"]})
    return [c for c in found if c.labels.get("org.openenv.pid") == mine]


@pytest.mark.docker
def test_bootstrap_three_containers(docker_engine: Any) -> None:
    providers = [DockerProvider(ECHO) for _ in range(3)]
    try:
        urls = start_providers(providers, 60)
        assert len(set(urls)) == 3
        for provider, url in zip(providers, urls, strict=True):
            container = docker_engine.containers.get(provider.container_id)
            port = container.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
            assert url == f"http://127.0.0.1:{port}"
            with httpx.Client(trust_env=False) as http:
                assert (http.get(f"{url}/health")).status_code == 200
    finally:
        _stop(providers)
    assert _ours(docker_engine) == []


@pytest.mark.docker
def test_bootstrap_one_container_of_three_exits_and_nothing_is_left(docker_engine: Any) -> None:
    providers = [DockerProvider(ECHO), DockerProvider(EXITS), DockerProvider(ECHO)]
    with pytest.raises(BootstrapError) as info:
        start_providers(providers, 60)
    assert list(info.value.failures) == [1]
    failure = info.value.failures[1]
    assert isinstance(failure, ContainerExited)
    assert f"[1] ContainerExited: container {providers[1].name} exited" in str(info.value)
    assert "fatal: cannot load environment (test image)" in str(info.value)  # its log lines
    assert _ours(docker_engine) == []


def _pulls(engine: Any, image: str, since: float) -> int:
    """The pulls of ``image`` the engine reports since ``since`` (its ``pull`` events; a local engine: one clock)."""
    until = time.time()
    events = engine.events(
        since=f"{since:.9f}", until=f"{until:.9f}", filters={"type": "image", "event": "pull"}, decode=True
    )
    return sum(1 for event in events if event.get("id") == image or event.get("Actor", {}).get("ID") == image)


@pytest.mark.docker
@pytest.mark.xdist_group("registry-images")  # they pull, tag and remove the same images on the one engine
def test_bootstrap_pulls_a_missing_image_once_for_many_providers(docker_engine: Any) -> None:
    import docker.errors

    image = f"{REGISTRY}/openenv-echo-env:latest"
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://{REGISTRY}/v2/", timeout=2):
            pass
    except OSError:
        pytest.skip(f"no loopback registry answers at {REGISTRY} (python3 scripts/docker_setup.py starts it)")
    try:
        docker_engine.images.remove(image)
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"cannot remove {image}: {exc}")
    providers = [DockerProvider(image) for _ in range(3)]
    try:
        since = time.time()
        urls = start_providers(providers, 60)
        assert len(urls) == 3
        assert _pulls(docker_engine, image, since) == 1  # what the engine saw: one pull for the three
    finally:
        _stop(providers)
        try:
            docker_engine.images.remove(image)
        except docker.errors.APIError:
            pass
    assert _ours(docker_engine) == []
