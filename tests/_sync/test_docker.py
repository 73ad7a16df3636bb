# GENERATED from tests/_async/test_docker.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``from_docker_image`` and ``from_env`` on a real Docker engine, in both twins."""

from __future__ import annotations

import os
from typing import Any

import pytest

from openenv.sync import (
    CapacityReached,
    ContainerExited,
    DockerProvider,
    Env,
    ImageNotFound,
    ReadinessTimeout,
)

pytestmark = pytest.mark.docker

ECHO = "openenv-test/echo:latest"
REGISTRY = os.environ.get("OPENENV_TEST_REGISTRY", "127.0.0.1:5000")


def _ours(engine: Any) -> list[Any]:
    mine = str(os.getpid())
    found = engine.containers.list(all=True, filters={"label": ["org.openenv.managed=1", f"org.openenv.pid={mine}"]})
    return [c for c in found if c.labels.get("org.openenv.pid") == mine]


def test_from_docker_image_runs_publishes_on_loopback_and_removes(docker_engine: Any) -> None:
    with Env.from_docker_image(ECHO, ready_timeout=60) as env:
        assert env.connected
        env.reset()
        result = env.step({"message": "container"})
        assert result.observation["echoed_message"] == "container"
        provider = env.provider
        assert isinstance(provider, DockerProvider)
        container = docker_engine.containers.get(provider.container_id)
        assert container.status == "running"
        bindings = container.attrs["HostConfig"]["PortBindings"]["8000/tcp"]
        assert [b["HostIp"] for b in bindings] == ["127.0.0.1"]
        assert container.labels["org.openenv.managed"] == "1"
        assert container.labels["org.openenv.session"] == provider.session_id
        assert env.base_url == f"http://127.0.0.1:{container.ports['8000/tcp'][0]['HostPort']}"
    assert _ours(docker_engine) == []


def test_env_vars_and_run_options_reach_the_container(docker_engine: Any) -> None:
    env = Env.from_docker_image(
        ECHO, env_vars={"MAX_CONCURRENT_ENVS": "1"}, run_options={"mem_limit": "256m"}, ready_timeout=60
    )
    try:
        container = docker_engine.containers.get(env.provider.container_id)  # type: ignore[union-attr]
        assert container.attrs["HostConfig"]["Memory"] == 256 * 1024 * 1024
        env.reset()
        with pytest.raises(CapacityReached):  # refused at the handshake (or, by older servers, at the first call)
            other = env.new_session()
            other.reset()
    finally:
        env.close()
    assert _ours(docker_engine) == []


def test_a_container_that_exits_on_start_says_why(docker_engine: Any) -> None:
    with pytest.raises(ContainerExited) as info:
        Env.from_docker_image("openenv-test/exits:latest", ready_timeout=60)
    assert info.value.exit_code == 3
    assert "fatal: cannot load environment" in str(info.value)
    assert "exit code 3" in str(info.value) or "code 3" in str(info.value)
    assert _ours(docker_engine) == []


def test_a_container_that_dies_while_starting_says_why(docker_engine: Any) -> None:
    with pytest.raises(ContainerExited) as info:
        Env.from_docker_image(
            "openenv-test/exits:latest", env_vars={"OPENENV_TEST_EXIT_DELAY": "1"}, ready_timeout=60
        )
    assert info.value.exit_code == 3
    assert "fatal: cannot load environment" in info.value.logs
    assert _ours(docker_engine) == []


def test_a_container_that_never_becomes_healthy_is_removed(docker_engine: Any) -> None:
    with pytest.raises(ReadinessTimeout) as info:
        Env.from_docker_image("openenv-test/never:latest", ready_timeout=15)
    # the error names the server's last answer (not the timeout of the wait's last poll, which the
    # deadline cuts short) and carries the container's log lines
    assert "did not become healthy within 15.0 s (last: HTTP 503)" in str(info.value)
    assert "never: listening on 0.0.0.0:8000" in str(info.value)
    assert _ours(docker_engine) == []


def test_a_slow_container_is_waited_for(docker_engine: Any) -> None:
    with Env.from_docker_image(
        "openenv-test/slow:latest", env_vars={"OPENENV_TEST_DELAY": "2"}, ready_timeout=60
    ) as env:
        assert (env.reset()).observation["echoed_message"] == "Echo environment ready!"
    assert _ours(docker_engine) == []


def test_a_missing_image_is_reported(docker_engine: Any) -> None:
    with pytest.raises(ImageNotFound, match="does-not-exist"):
        Env.from_docker_image("openenv-test/does-not-exist:latest", pull=False)
    with pytest.raises(ImageNotFound, match="does-not-exist"):
        Env.from_docker_image(f"{REGISTRY}/openenv-test-does-not-exist:latest")
    assert _ours(docker_engine) == []


@pytest.mark.xdist_group("registry-images")  # they pull, tag and remove the same images on the one engine
def test_from_env_pulls_a_space_image_from_the_registry(docker_engine: Any) -> None:
    image = f"{REGISTRY}/openenv-echo-env:latest"
    try:
        docker_engine.images.remove(image, force=True)
    except Exception:  # noqa: BLE001 - absent already
        pass
    try:
        with Env.from_env("openenv/echo_env", registry=REGISTRY, ready_timeout=60) as env:
            env.reset()
            assert (env.step({"message": "pulled"})).observation["echoed_message"] == "pulled"
            assert env.provider.image == image  # type: ignore[union-attr]
    finally:
        try:
            docker_engine.images.remove(image, force=True)
        except Exception:  # noqa: BLE001
            pass
    assert _ours(docker_engine) == []
