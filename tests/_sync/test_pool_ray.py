# GENERATED from tests/_async/test_pool_ray.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``EnvPool`` over Ray actors (``-m ray``): a batch across servers, failure isolation, replacement, capacity.

The cluster is the session's loopback cluster (``ray_cluster`` in conftest).
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from openenv.sync import Env, EnvPool, PoolError, RayProvider

from ..helpers_sync import gather

pytestmark = pytest.mark.ray
if importlib.util.find_spec("ray") is None:
    pytest.skip("needs Ray: pip install 'openenv-twin[ray]' (nox -s ray)", allow_module_level=True)

COUNTER = "tests.envs:CounterEnv"


@pytest.fixture
def ray(ray_cluster: str) -> Iterator[Any]:
    """The ray module, connected to the session's cluster; no actor of ours may outlive the test."""
    module = importlib.import_module("ray")
    yield module
    _wait_for(lambda: not _our_actors(module), "actors still alive after the test")


def _our_actors(ray: Any) -> set[str]:
    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "openenv"}


def _kill(ray: Any, provider: RayProvider, url: str) -> None:
    """Kill the provider's actor and wait until its server stops answering (``ray.kill`` does not wait)."""
    ray.kill(ray.get_actor(provider.actor_name, namespace="openenv"))

    def gone() -> bool:
        try:
            httpx.get(f"{url}/health", timeout=1.0)
        except httpx.HTTPError:
            return True
        return False

    _wait_for(gone, f"{url} still answers after its actor was killed")


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            pytest.fail(what)
        time.sleep(0.1)


def test_a_batch_steps_across_actors_and_a_dead_one_is_isolated_then_replaced(ray: Any) -> None:
    made: list[RayProvider] = []

    def factory(index: int) -> RayProvider:
        made.append(RayProvider(COUNTER, num_cpus=0))
        return made[-1]

    with EnvPool.from_provider(factory, size=3, ready_timeout=180) as pool:
        assert len({str(p) for p in pool.providers}) == 3 and len(_our_actors(ray)) == 3
        results = pool.reset(kwargs=[{"start": 10 * i} for i in range(3)])
        assert [r.observation["count"] for r in results] == [0, 10, 20]
        results = pool.step([{"delta": i + 1} for i in range(3)])
        assert [r.observation["count"] for r in results] == [1, 12, 23]

        _kill(ray, made[1], pool.envs[1].base_url)  # its server dies with it
        with pytest.raises(PoolError) as info:
            pool.step([{"delta": 1}] * 3)
        assert list(info.value.errors) == [1]
        assert [r.observation["count"] if r else None for r in info.value.results.values()] == [2, None, 24]
        assert pool.metrics.failures == 1 and pool.metrics.active == 2

        result = pool.replace(1)  # a new actor from the factory, reset
        assert result.observation["count"] == 0 and len(made) == 4
        assert made[1].actor_name not in _our_actors(ray) and made[3].actor_name in _our_actors(ray)
        results = pool.step([{"delta": 1}] * 3)
        assert [r.observation["count"] for r in results] == [3, 1, 25]
        assert pool.metrics.replacements == 1
    _wait_for(lambda: not _our_actors(ray), "actors alive after the pool closed")


def test_on_failure_replace_recreates_the_actor_by_itself(ray: Any) -> None:
    made: list[RayProvider] = []

    def factory(index: int) -> RayProvider:
        made.append(RayProvider(COUNTER, num_cpus=0))
        return made[-1]

    with EnvPool.from_provider(factory, size=2, on_failure="replace", ready_timeout=180) as pool:
        pool.reset()
        _kill(ray, made[0], pool.envs[0].base_url)
        results = pool.step([{"delta": 5}] * 2)  # no error raised: session 0 was replaced
        assert [r.observation["count"] for r in results] == [0, 5]  # 0: the new episode's reset
        assert list(pool.last_errors) == [0] and pool.metrics.replacements == 1
        assert len(made) == 3 and len(_our_actors(ray)) == 2


def test_a_pool_on_one_actor_waits_for_capacity(ray: Any) -> None:
    provider = RayProvider(COUNTER, num_cpus=0, max_sessions=2)
    with Env.from_provider(provider, ready_timeout=180) as holder:
        url = holder.base_url
        holder.reset()
        pool = EnvPool(url, size=2, capacity_timeout=30)  # one slot is taken by ``holder``

        def open_pool() -> Any:
            return pool.connect()

        def free_a_slot() -> None:
            holder.disconnect()

        try:
            opened, _ = gather(open_pool, free_a_slot, stagger=0.5)
            assert opened is pool
            assert len(pool.step([{"delta": 1}] * 2)) == 2
        finally:
            pool.close()
