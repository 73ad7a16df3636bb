# GENERATED from tests/_async/test_docker_faults.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Docker faults in both twins: a container killed mid-episode, a taken port, bootstrap failures without leaks."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from openenv.sync import ContainerExited, Env, ProviderError, ReadinessTimeout, SessionLost

from .. import leaks
from ..helpers_sync import assert_no_leaks

pytestmark = pytest.mark.docker

ECHO = "openenv-test/echo:latest"


def _warm_snapshot() -> leaks.Snapshot:
    """A leak snapshot taken after one container came and went.

    The first container of a program starts its watcher process (the reaper,
    one per program, alive until the program ends, by design) and docker-py's
    connection pool; what a fault leaks is what comes on top of that.
    """
    with Env.from_docker_image(ECHO, ready_timeout=60):
        pass
    return leaks.snapshot()


def _ours(engine: Any) -> list[str]:
    mine = str(os.getpid())
    found = engine.containers.list(all=True, filters={"label": ["org.openenv.managed=1", f"org.openenv.pid={mine}"]})
    return [c.name for c in found if c.labels.get("org.openenv.pid") == mine]


def test_a_container_killed_mid_episode_loses_the_session_and_is_removed(docker_engine: Any) -> None:
    before = _warm_snapshot()
    env = Env.from_docker_image(ECHO, ready_timeout=60, message_timeout=10)
    try:
        env.reset()
        env.step({"message": "one"})
        # the docker CLI, not the fixture's docker-py client: its pooled sockets would count as leaks
        kill = ["docker", "kill", env.provider.container_id]  # type: ignore[union-attr]
        subprocess.run(kill, check=True, capture_output=True, timeout=60)  # noqa: ASYNC221 - a test step, on purpose
        with pytest.raises(SessionLost):
            env.step({"message": "two"})
        with pytest.raises(SessionLost, match="reset"):  # later calls keep saying so until reset()
            env.state()
    finally:
        env.close()
    assert_no_leaks(before)
    assert _ours(docker_engine) == []


def test_a_taken_port_is_reported_and_leaves_nothing(docker_engine: Any) -> None:
    first = Env.from_docker_image(ECHO, ready_timeout=60)
    try:
        port = int(first.base_url.rsplit(":", 1)[1].split("/")[0])
        names = _ours(docker_engine)
        with pytest.raises(ProviderError) as info:
            Env.from_docker_image(ECHO, port=port, ready_timeout=60)
        assert str(port) in str(info.value) and "port" in str(info.value) and "another port" in str(info.value)
        assert _ours(docker_engine) == names  # only the first container
        first.reset()  # the first one is untouched
    finally:
        first.close()
    assert _ours(docker_engine) == []


def test_bootstrap_failures_leak_nothing(docker_engine: Any) -> None:
    before = _warm_snapshot()
    with pytest.raises(ContainerExited):
        Env.from_docker_image("openenv-test/exits:latest", ready_timeout=60)
    with pytest.raises(ReadinessTimeout):
        Env.from_docker_image("openenv-test/never:latest", ready_timeout=1.5)
    assert_no_leaks(before)
    assert _ours(docker_engine) == []
