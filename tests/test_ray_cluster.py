"""RayProvider on a cluster of several Ray nodes on this machine (``-m ray``; ``tests/ray_clusters.py``).

Each test starts a cluster of its own (Ray's ``cluster_utils.Cluster``, every node on
loopback at an address of its own, ``127.0.0.2``, ``127.0.0.3``, ...) and stops it at the
end; the ``ray_nodes`` fixture fails the test if a process of it is left.  What a node
dying does to a pool is in ``tests/_async/test_pool_ray_cluster.py`` (both twins).
"""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv.sync import EnvPool, ProviderError, RayProvider

pytestmark = pytest.mark.ray
if importlib.util.find_spec("ray") is None:
    pytest.skip("needs Ray: pip install 'openenv-twin[ray]' (nox -s ray)", allow_module_level=True)

COUNTER = "tests.envs:CounterEnv"


def actor_node(ray: Any, provider: RayProvider) -> str:
    """The node ID the GCS records for the provider's actor (Ray's view, not the actor's own report)."""
    actor = ray.get_actor(provider.actor_name, namespace="openenv")
    record = ray._private.state.actors(actor_id=actor._actor_id.hex())
    return str(record["Address"]["NodeID"])


def test_spread_places_servers_on_different_nodes_and_the_pool_uses_each_nodes_address(
    ray_module: Any, ray_nodes: Any
) -> None:
    ray = ray_module
    cluster = ray_nodes(3)
    made: list[RayProvider] = []

    def factory(index: int) -> RayProvider:
        # SPREAD needs a reservation to act on; env_slot: 4 per node, so capacity alone would not spread them
        made.append(
            RayProvider(COUNTER, host="node", scheduling_strategy="SPREAD", num_cpus=0, resources={"env_slot": 1})
        )
        return made[-1]

    with EnvPool.from_provider(factory, size=3, ready_timeout=180) as pool:
        nodes = [cluster.by_id()[actor_node(ray, provider)] for provider in made]  # KeyError: the head
        assert len({node.node_id for node in nodes}) == 3, nodes
        for env, provider, node in zip(pool.envs, made, nodes, strict=True):
            assert urlsplit(env.base_url).hostname == node.ip != "127.0.0.1"
            assert env.base_url == provider.url
        pool.reset(kwargs=[{"start": 10 * i} for i in range(3)])
        assert [r.observation["count"] for r in pool.step([{"delta": 1}] * 3)] == [1, 11, 21]

    # the default host, 127.0.0.1, on a node other than the driver's: only that node could connect
    provider = RayProvider("echo", num_cpus=0, resources={"node0": 1})
    with pytest.raises(ProviderError, match="host='node'") as caught:
        provider.start()
    assert cluster.nodes[0].ip in str(caught.value)
    provider.stop()
