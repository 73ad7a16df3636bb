"""RayProvider without a cluster: option checks, the URL's host, and the error when Ray is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openenv._blocking import ray as _ray
from openenv.sync import InvalidOption, RayProvider


def test_options_are_passed_through_and_named_in_our_namespace() -> None:
    strategy = object()  # any strategy object goes to Ray untouched
    provider = RayProvider(
        "echo",
        num_cpus=0.5,
        num_gpus=1,
        memory=2**30,
        resources={"env_slot": 1},
        runtime_env={"env_vars": {"A": "1"}},
        scheduling_strategy=strategy,
        actor_options={"max_concurrency": 2},
    )
    assert provider.options == {
        "name": provider.actor_name,
        "namespace": "openenv",
        "max_restarts": 0,
        "num_cpus": 0.5,
        "num_gpus": 1,
        "memory": 2**30,
        "resources": {"env_slot": 1},
        "runtime_env": {"env_vars": {"A": "1"}},
        "scheduling_strategy": strategy,
        "max_concurrency": 2,
    }
    assert provider.actor_name.startswith("openenv-server-")
    assert RayProvider("echo").actor_name != provider.actor_name
    # a name of one's own would be shared by every provider a pool's factory makes: refused
    with pytest.raises(InvalidOption, match="names its actors itself"):
        RayProvider("echo", actor_options={"name": "mine"})
    with pytest.raises(ValueError):
        RayProvider("echo", actor_options={"name": None})
    assert "num_cpus" not in RayProvider("echo").options  # Ray's own default


def test_what_would_leave_an_actor_behind_is_refused() -> None:
    with pytest.raises(InvalidOption, match="detached"):
        RayProvider("echo", actor_options={"lifetime": "detached"})
    with pytest.raises(InvalidOption, match="max_restarts"):
        RayProvider("echo", actor_options={"max_restarts": 3})
    with pytest.raises(TypeError, match="exactly one"):
        RayProvider()
    with pytest.raises(TypeError, match="exactly one"):
        RayProvider("echo", app="server.app:app")
    with pytest.raises(InvalidOption):
        RayProvider("echo", max_sessions=0)
    with pytest.raises(InvalidOption):
        RayProvider("echo", start_timeout=float("nan"))


def test_the_server_binds_loopback_unless_asked_and_a_remote_loopback_is_refused() -> None:
    assert _ray.bind_address(None, "10.0.0.7") == "127.0.0.1"
    assert _ray.bind_address("127.0.0.1", "10.0.0.7") == "127.0.0.1"
    assert _ray.bind_address("node", "10.0.0.7") == "10.0.0.7"
    assert _ray.bind_address("0.0.0.0", "10.0.0.7") == "0.0.0.0"
    assert _ray.loopback_problem("127.0.0.1", "10.0.0.7", "10.0.0.7") is None  # the driver's own node
    assert _ray.loopback_problem("10.0.0.7", "10.0.0.7", "10.0.0.8") is None  # bound to the node's IP
    problem = _ray.loopback_problem("127.0.0.1", "10.0.0.7", "10.0.0.8")
    assert problem is not None and "host='node'" in problem and "no authentication" in problem


def test_spread_without_a_reservation_is_refused_with_what_to_pass() -> None:
    # Ray places an actor that holds nothing on a random node, whatever the strategy: SPREAD would not spread
    for options in ({}, {"num_cpus": 0}, {"memory": 0}, {"num_cpus": 0, "resources": {"env_slot": 0}}):
        with pytest.raises(InvalidOption, match=r"SPREAD.*reserves none.*resources=\{'env_slot': 1\}"):
            RayProvider("echo", scheduling_strategy="SPREAD", **options)
    for options in ({"num_cpus": 1}, {"num_cpus": 0, "resources": {"env_slot": 1}}, {"memory": 1}, {"num_gpus": 1}):
        RayProvider("echo", scheduling_strategy="SPREAD", **options)
    RayProvider("echo", scheduling_strategy="SPREAD", actor_options={"num_cpus": 1})  # wherever it is given
    RayProvider("echo", scheduling_strategy="DEFAULT")


def test_what_an_actor_holds_follows_rays_defaults() -> None:
    assert _ray.reservation({}) == {"CPU": 0}  # 1 CPU to be placed, none while it runs
    assert _ray.reservation({"memory": 5}) == {"memory": 5, "CPU": 0}
    assert _ray.reservation({"resources": {"env_slot": 1}}) == {"env_slot": 1, "CPU": 1}  # a CPU for its life
    assert _ray.reservation({"num_gpus": 1}) == {"GPU": 1, "CPU": 1}
    assert _ray.reservation({"num_cpus": 0, "resources": {"env_slot": 1}}) == {"CPU": 0, "env_slot": 1}


def test_a_server_bound_to_its_nodes_loopback_address_is_reachable() -> None:
    # a cluster on one machine whose nodes have loopback addresses of their own (127.0.0.2, ...)
    assert _ray.loopback_problem("127.0.0.3", "127.0.0.3", "127.0.0.1") is None
    assert _ray.loopback_problem("127.0.0.1", "127.0.0.3", "127.0.0.1") is not None  # the other node's 127.0.0.1


def test_the_url_names_the_node_for_a_wildcard_bind() -> None:
    assert _ray.public_host("0.0.0.0", "10.0.0.7") == "10.0.0.7"
    assert _ray.public_host("::", "fd00::7") == "[fd00::7]"
    assert _ray.public_host("127.0.0.1", "10.0.0.7") == "127.0.0.1"


def test_without_ray_starting_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from openenv.sync import ProviderError, RayProvider\n"
        "provider = RayProvider('echo')\n"
        "try:\n"
        "    provider.start()\n"
        "except ProviderError as exc:\n"
        "    print(exc)\n"
        "provider.stop()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'openenv-twin[ray]'" in out
