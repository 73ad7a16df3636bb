"""RayProvider on a real local Ray cluster (``-m ray``; ``nox -s ray`` installs the ``ray`` extra).

One cluster for the module, bound to loopback: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
makes Ray use 127.0.0.1 as the node's IP address (it otherwise replaces
``_node_ip_address="127.0.0.1"`` with a routable address). The actors' servers bind
127.0.0.1 by default whatever the node's IP (``host="node"`` binds that).
It has 2 CPUs and 2 units of a custom resource ``env_slot``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv._sync.bootstrap import start_providers
from openenv.sync import Env, ProviderError, RayProvider, ReadinessTimeout

from .conftest import RAY_CLUSTER_ENV
from .envs import CounterEnv

pytestmark = pytest.mark.ray
if importlib.util.find_spec("ray") is None:
    pytest.skip("needs Ray: pip install 'openenv-twin[ray]' (nox -s ray)", allow_module_level=True)
ray: Any = None  # imported by the cluster fixture, once CLUSTER_ENV is set (Ray reads it on import)

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_ENV = RAY_CLUSTER_ENV


@pytest.fixture(scope="module")
def cluster(ray_cluster: str) -> str:
    """The session's loopback cluster (``ray_cluster`` in conftest); yields its GCS address (for a second driver)."""
    global ray
    ray = importlib.import_module("ray")
    return ray_cluster


@pytest.fixture(autouse=True)
def nothing_left(cluster: str) -> Iterator[None]:
    """Every test leaves no actor of ours alive."""
    yield
    _wait_for(lambda: not _our_actors(), "actors still alive after the test")


def _our_actors() -> set[str]:
    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "openenv"}


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _still_answers(actor: Any) -> bool:
    """Whether ``actor`` still runs a method (``False`` once Ray says it died)."""
    try:
        ray.get(actor.status.remote(), timeout=10.0)
    except ray.exceptions.RayActorError:
        return False
    except ray.exceptions.GetTimeoutError:
        return True
    return True


def _wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} (after {timeout} s)")
        time.sleep(0.1)


def test_env_from_provider_steps_and_close_kills_the_actor() -> None:
    provider = RayProvider("tests.envs:CounterEnv", max_sessions=2)
    with Env.from_provider(provider, ready_timeout=180) as env:
        url = env.base_url
        assert url.startswith("http://127.0.0.1:")  # the node's IP on this loopback cluster
        assert provider.url == url
        assert env.reset().observation["count"] == 0
        assert env.step({"delta": 3}).observation["count"] == 3
        with env.new_session() as second:  # max_sessions reached the server
            second.reset()
        assert provider.actor_name in _our_actors()
        assert "serves on " + url in provider.logs()
    _wait_for(lambda: not _answers(url), "the server still answers after close")
    assert provider.actor_name not in _our_actors()
    provider.stop()  # idempotent
    provider.stop()


def _routable_local_ip() -> str | None:
    """An address of this machine other than loopback (none on a host without a network)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))  # no packet is sent
            ip = str(sock.getsockname()[0])
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_the_server_binds_loopback_unless_host_says_otherwise() -> None:
    provider = RayProvider("tests.envs:CounterEnv")
    with Env.from_provider(provider, ready_timeout=180) as env:
        status = ray.get(provider._actor.status.remote(), timeout=30)
        assert status["bind"] == "127.0.0.1" and env.base_url.startswith("http://127.0.0.1:")
        other = _routable_local_ip()
        if other is not None:  # not reachable through this machine's other addresses
            port = env.base_url.rsplit(":", 1)[1]
            assert not _answers(f"http://{other}:{port}")
    node = RayProvider("tests.envs:CounterEnv", host="node")
    with Env.from_provider(node, ready_timeout=180) as env:
        status = ray.get(node._actor.status.remote(), timeout=30)
        assert status["bind"] == status["node_ip"]
        assert env.reset().observation["count"] == 0


def test_a_class_or_closure_is_pickled_to_the_actor() -> None:
    start = 5

    def factory() -> CounterEnv:  # a closure: cloudpickle ships it by value
        env = CounterEnv()
        env._count = start
        return env

    with Env.from_provider(RayProvider(factory), ready_timeout=180) as env:
        env.reset()
        assert env.step({"delta": 1}).observation["count"] == 1
    with Env.from_provider(RayProvider(CounterEnv), ready_timeout=180) as env:
        env.reset(start=2)
        assert env.step({"delta": 2}).observation["count"] == 4


def test_three_providers_start_together_and_stop() -> None:
    providers = [RayProvider("echo") for _ in range(3)]
    urls = start_providers(providers, ready_timeout=180)
    try:
        assert len(set(urls)) == 3
        assert all(_answers(url) for url in urls)
        assert {p.actor_name for p in providers} <= _our_actors()
    finally:
        for provider in providers:
            provider.stop()
    for url in urls:
        _wait_for(lambda url=url: not _answers(url), f"{url} still answers after stop")


def test_a_custom_resource_limits_the_actors_and_the_extra_one_times_out() -> None:
    providers = [RayProvider("echo", resources={"env_slot": 1}, start_timeout=60) for _ in range(2)]
    extra = RayProvider("echo", resources={"env_slot": 1}, start_timeout=2)
    urls = start_providers(providers, ready_timeout=180)
    try:
        with pytest.raises(ReadinessTimeout) as caught:
            extra.start()  # both slots are taken: Ray keeps it pending, the timeout ends the wait
        message = str(caught.value)
        assert extra.actor_name in message and "'env_slot': 1" in message and "0 of 2" in message
        assert "'CPU': 1" in message and "num_cpus=0" in message  # Ray's implicit CPU, and how to hold none
        assert extra.actor_name not in _our_actors()  # the pending actor was removed
    finally:
        for provider in providers:
            provider.stop()
        extra.stop()
    assert all(url.startswith("http://127.0.0.1:") for url in urls)
    # the slots are free again
    with Env.from_provider(RayProvider("echo", resources={"env_slot": 2}), ready_timeout=180) as env:
        env.reset()


def test_placement_options_are_passed_to_ray() -> None:
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=60)
    try:
        providers = [
            RayProvider("echo", scheduling_strategy="SPREAD", num_cpus=0, memory=1),
            RayProvider("echo", scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)),
            RayProvider("echo", num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(group)),
        ]
        urls = start_providers(providers, ready_timeout=180)
        try:
            assert all(_answers(url) for url in urls)
            assert ray.available_resources().get("CPU", 0) <= 1  # the group holds one of the two CPUs
        finally:
            for provider in providers:
                provider.stop()
    finally:
        remove_placement_group(group)
    # a node that does not exist: never placed, and the wait ends
    missing = NodeAffinitySchedulingStrategy(node_id="ab" * 28, soft=False)
    with pytest.raises(ProviderError):
        Env.from_provider(RayProvider("echo", scheduling_strategy=missing, start_timeout=5), ready_timeout=180)


def test_a_server_that_cannot_start_says_why() -> None:
    provider = RayProvider("tests.no_such_module:Env")
    with pytest.raises(ProviderError, match="ModuleNotFoundError.*no_such_module") as caught:
        Env.from_provider(provider, ready_timeout=180)
    assert provider.actor_name in str(caught.value)


def test_an_actor_that_dies_ends_the_wait_with_the_reason() -> None:
    provider = RayProvider("echo")
    url = provider.start()
    try:
        actor = ray.get_actor(provider.actor_name, namespace="openenv")
        ray.kill(actor)
        # ray.kill only asks: until the kill lands, the actor still answers (its server too, healthy), and a wait
        # that started then rightly found the server ready (seen in a loaded CI run). The stimulus is a dead actor.
        _wait_for(lambda: not _still_answers(actor), "the killed actor still answers")
        with pytest.raises(ProviderError, match=f"actor {provider.actor_name} died") as caught:
            provider.wait_until_ready(url, 60)
        assert "ray.kill" in str(caught.value)
        assert provider.logs() == ""
    finally:
        provider.stop()


def test_an_asgi_app_under_uvicorn() -> None:
    pytest.importorskip("uvicorn")
    provider = RayProvider(app="tests.ray_asgi_app:app", max_sessions=2, server_options={"log_level": "warning"})
    with Env.from_provider(provider, ready_timeout=180) as env:
        env.reset()
        assert env.step({"delta": 4}).observation["count"] == 4
        with env.new_session() as second:  # MAX_CONCURRENT_ENVS=2 reached the app
            second.reset()


async def test_aio_provider() -> None:
    from openenv.aio import Env as AsyncEnv
    from openenv.aio import RayProvider as AsyncRayProvider

    provider = AsyncRayProvider("echo")
    async with await AsyncEnv.from_provider(provider, ready_timeout=180) as env:
        await env.reset()
        assert (await env.step({"message": "ray"})).observation["echoed_message"] == "ray"
        assert provider.actor_name in _our_actors()
    await provider.stop()


DRIVER = """
import sys, time
from openenv.sync import RayProvider
providers = [RayProvider("echo", address=sys.argv[1]) for _ in range(2)]
for provider in providers:
    url = provider.start()
    provider.wait_until_ready(url, 60)
    print(provider.actor_name, url, flush=True)
time.sleep(600)
"""


def test_the_actors_die_with_their_driver(cluster: str) -> None:
    env = {**os.environ, **CLUSTER_ENV, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", DRIVER, cluster], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert child.stdout is not None
        started = [child.stdout.readline().split() for _ in range(2)]
        assert all(len(line) == 2 for line in started), started
        for name, url in started:
            assert _answers(url) and name in _our_actors()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    for name, url in started:
        _wait_for(lambda url=url: not _answers(url), f"{url} still answers after its driver was killed")
        _wait_for(lambda name=name: name not in _our_actors(), f"{name} is alive after its driver was killed")


def test_the_guide_example_runs() -> None:
    text = (ROOT / "docs" / "guides" / "distributed.md").read_text()
    blocks = re.findall(r"<!-- docs: skip [^>]*nox -s ray[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert blocks, "the guide's Ray example (marked for nox -s ray) was not found"
    for code in blocks:
        exec(compile(code, "docs/guides/distributed.md", "exec"), {"__name__": "docs_example"})


def test_a_pool_resizes_and_closes_without_leaving_actors() -> None:
    import openenv.sync

    if not hasattr(openenv.sync, "EnvPool"):
        pytest.skip("EnvPool.from_provider is built on another branch")
    made: list[RayProvider] = []

    def factory(index: int) -> RayProvider:
        made.append(RayProvider("echo"))
        return made[-1]

    pool = openenv.sync.EnvPool.from_provider(factory, size=2)
    try:
        assert {p.actor_name for p in made} <= _our_actors()
        pool.resize(3)
        assert len(made) == 3 and {p.actor_name for p in made} <= _our_actors()
        pool.resize(1)
        _wait_for(lambda: len(_our_actors() & {p.actor_name for p in made}) == 1, "resize(1) left actors alive")
    finally:
        pool.close()
    _wait_for(lambda: not _our_actors(), "actors alive after the pool closed")
