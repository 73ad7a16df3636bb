# GENERATED from tests/_async/test_pool_ray_cluster.py by scripts/run_unasync.py -- DO NOT EDIT.
"""An ``EnvPool`` of Ray servers spread over several nodes loses a node (``-m ray``; ``tests/ray_clusters.py``).

The cluster is this test's own: three nodes on loopback at addresses of their own,
started and stopped (every process of it checked gone) by the ``ray_nodes`` fixture.
"""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv.sync import EnvPool, RayProvider

pytestmark = pytest.mark.ray
if importlib.util.find_spec("ray") is None:
    pytest.skip("needs Ray: pip install 'openenv-twin[ray]' (nox -s ray)", allow_module_level=True)


def _node_of(ray: Any, provider: object) -> str:
    """The node ID the GCS records for the provider's actor."""
    assert isinstance(provider, RayProvider)
    actor = ray.get_actor(provider.actor_name, namespace="openenv")
    return str(ray._private.state.actors(actor_id=actor._actor_id.hex())["Address"]["NodeID"])


def test_a_dead_nodes_sessions_are_replaced_on_the_surviving_nodes(ray_module: Any, ray_nodes: Any) -> None:
    ray = ray_module
    cluster = ray_nodes(3)
    made: list[RayProvider] = []

    def factory(index: int) -> RayProvider:
        made.append(
            RayProvider(
                "tests.envs:CounterEnv",
                host="node",
                scheduling_strategy="SPREAD",
                num_cpus=0,
                resources={"env_slot": 1},
            )
        )
        return made[-1]

    with EnvPool.from_provider(factory, size=4, on_failure="replace", ready_timeout=180) as pool:
        pool.reset(kwargs=[{"start": 10 * i} for i in range(4)])
        placed = [_node_of(ray, provider) for provider in pool.providers]
        assert len(set(placed)) == 3  # four servers over three nodes: one node holds two
        victim = cluster.by_id()[placed[0]]
        lost = [i for i, node_id in enumerate(placed) if node_id == victim.node_id]

        cluster.remove(victim)  # SIGKILL to its raylet, agents and workers: our servers die with them
        results = pool.step([{"delta": 1}] * 4)  # no error raised: the lost sessions were replaced
        assert sorted(pool.last_errors) == lost
        assert [r.observation["count"] for r in results] == [0 if i in lost else 10 * i + 1 for i in range(4)]
        assert pool.metrics.replacements == len(lost) and len(made) == 4 + len(lost)

        survivors = cluster.by_id()
        for i in range(4):  # every session, old or new, runs on a live node at that node's address
            node = survivors[_node_of(ray, pool.providers[i])]
            assert urlsplit(pool.envs[i].base_url).hostname == node.ip
        results = pool.step([{"delta": 2}] * 4)  # and the pool keeps stepping
        assert [r.observation["count"] for r in results] == [2 if i in lost else 10 * i + 3 for i in range(4)]
        assert not pool.last_errors
