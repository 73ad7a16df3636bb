"""Ray clusters on this machine for the ``-m ray`` tests: one head, or a head and several nodes, all on loopback.

Built on Ray's own test utility, ``ray.cluster_utils.Cluster``: every node is a
raylet of its own (its own ports, all picked free by Ray or the OS, so two runs
never collide) and the test process only *connects* its driver to the cluster
(``ray.init(address=...)``), so it can switch between clusters: ``ray.shutdown()``
then disconnects it without stopping anything.

The nodes of a multi-node cluster have addresses of their own on loopback
(``127.0.0.2``, ``127.0.0.3``, ...: Linux routes all of ``127.0.0.0/8`` to ``lo``),
so a URL says which node it came from, and each carries a custom resource
``node<k>`` that tells it apart (as many units as it has ``env_slot``).  The head (``127.0.0.1``, where the driver
attaches) has no CPU, so it runs no server.

``shutdown`` stops every process the cluster started (GCS, raylets, agents,
workers) and waits until none is left; ``remove`` does the same for one node.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

#: Ray reads these on import: node IP 127.0.0.1 (everything on loopback), no telemetry, no token file
RAY_CLUSTER_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}
#: a dead node is declared dead after about a second (Ray's default: about 15 s)
FAST_NODE_DEATH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 300,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}


def connect(ray: Any, address: str) -> None:
    """Connect this process's driver to the cluster at ``address`` (disconnecting it from another first)."""
    if ray.is_initialized():
        if ray.get_runtime_context().gcs_address == address:
            return
        ray.shutdown()  # the cluster was started by a Cluster: this only disconnects the driver
    ray.init(address=address, log_to_driver=False, _node_ip_address="127.0.0.1")


def disconnect(ray: Any) -> None:
    if ray.is_initialized():
        ray.shutdown()


def _stat(pid: int) -> tuple[int, str, int] | None:
    """``(ppid, state, start time)`` of ``pid`` from ``/proc``, or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0], int(fields[19])


def descendants(roots: set[int]) -> set[tuple[int, int]]:
    """``roots`` and every process below them, as ``(pid, start time)`` (a PID alone gets reused)."""
    parents: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _stat(int(name))
            if info is not None:
                parents.setdefault(info[0], []).append(int(name))
                starts[int(name)] = info[2]
    found: set[tuple[int, int]] = set()
    todo = [pid for pid in roots if pid in starts]
    while todo:
        pid = todo.pop()
        found.add((pid, starts[pid]))
        todo.extend(child for child in parents.get(pid, []) if child in starts)
    return found


def cluster_processes(cluster: Any) -> set[tuple[int, int]]:
    """Every process of a ``ray.cluster_utils.Cluster``'s nodes and everything below them (their workers)."""
    roots = {
        info.process.pid for node in cluster.list_all_nodes() for infos in node.all_processes.values() for info in infos
    }
    return descendants(roots)


def alive(processes: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Those of ``processes`` still running (a zombie has ended)."""
    left = set()
    for pid, start in processes:
        info = _stat(pid)
        if info is not None and info[2] == start and info[1] != "Z":
            left.add((pid, start))
    return left


def wait_gone(processes: set[tuple[int, int]], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while left := alive(processes):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: processes still alive after {timeout} s: {sorted(left)}")
        time.sleep(0.1)


@dataclass
class Node:
    """One node of a :class:`LoopbackCluster`: its Ray node ID, IP, custom resource and ``ray._private.node.Node``."""

    index: int
    ip: str
    resource: str
    node_id: str
    handle: Any = field(repr=False)

    def processes(self) -> set[tuple[int, int]]:
        """This node's processes (raylet, agents) and everything below them (its workers)."""
        roots = {info.process.pid for infos in self.handle.all_processes.values() for info in infos}
        return descendants(roots)


class LoopbackCluster:
    """A Ray cluster of a CPU-less head (the driver's node) and ``nodes`` nodes on ``127.0.0.<k + 2>``.

    Each node has ``cpus`` CPUs and ``slots`` units of ``env_slot`` and of ``node<k>``.  The driver
    is connected on start and disconnected by ``shutdown``.
    """

    def __init__(self, ray: Any, nodes: int, *, cpus: int = 1, slots: int = 4) -> None:
        from ray.cluster_utils import Cluster

        self.ray = ray
        self.nodes: list[Node] = []
        self.removed: list[Node] = []
        self._seen: set[tuple[int, int]] = set()
        self._cpus, self._slots = cpus, slots
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
                "_system_config": FAST_NODE_DEATH,
            },
        )
        try:
            handles = [self._add(index) for index in range(nodes)]
            connect(ray, self.address)
            ids = {entry["NodeManagerAddress"]: entry["NodeID"] for entry in ray.nodes() if entry["Alive"]}
            self.nodes = [
                Node(index, f"127.0.0.{index + 2}", f"node{index}", ids[f"127.0.0.{index + 2}"], handle)
                for index, handle in enumerate(handles)
            ]
        except BaseException:
            self.shutdown()
            raise

    def _add(self, index: int) -> Any:
        return self.cluster.add_node(
            num_cpus=self._cpus,
            resources={f"node{index}": self._slots, "env_slot": self._slots},
            node_ip_address=f"127.0.0.{index + 2}",
        )

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def by_id(self) -> dict[str, Node]:
        return {node.node_id: node for node in self.nodes}

    def remove(self, node: Node) -> None:
        """Kill every process of ``node`` (SIGKILL: a crashed machine), wait until they are gone and Ray knows."""
        processes = node.processes()
        self._seen |= processes
        self.cluster.remove_node(node.handle, allow_graceful=False)
        self.nodes.remove(node)
        self.removed.append(node)
        wait_gone(processes, f"node {node.ip} after remove_node")
        deadline = time.monotonic() + 60.0
        while any(e["NodeID"] == node.node_id and e["Alive"] for e in self.ray.nodes()):
            if time.monotonic() > deadline:
                raise AssertionError(f"Ray still lists node {node.ip} as alive 60 s after it was killed")
            time.sleep(0.1)

    def shutdown(self) -> None:
        """Disconnect the driver, stop every node, and check that none of their processes is left."""
        disconnect(self.ray)
        processes = cluster_processes(self.cluster) | self._seen
        self.cluster.shutdown()
        wait_gone(processes, "the Ray cluster after shutdown")
