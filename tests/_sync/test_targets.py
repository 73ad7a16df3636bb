# GENERATED from tests/_async/test_targets.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Every entry point that takes a target reads it by the one resolver (`openenv._core.targets`), without Docker."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from openenv.sync import (
    BootstrapError,
    CheckoutNotRunnable,
    DockerUnavailable,
    Env,
    EnvPool,
    InvalidURL,
    environment_factory,
)


def _from_env(target: str) -> Any:
    return Env.from_env(target, ready_timeout=5)


def _from_schema(target: str) -> Any:
    return Env.from_schema(target, ready_timeout=5)


def _pool_from_env(target: str) -> Any:
    return EnvPool.from_env(target, size=1, ready_timeout=5)


def _environment_factory(target: str) -> Any:
    return environment_factory(target, ready_timeout=5)


ENTRY_POINTS: dict[str, Callable[[str], Awaitable[Any]]] = {
    "Env.from_env": _from_env,
    "Env.from_schema": _from_schema,
    "EnvPool.from_env": _pool_from_env,
    "environment_factory": _environment_factory,
}

CASES = [
    ("./does-not-exist", InvalidURL, r"'./does-not-exist': no such directory .*does-not-exist\)"),
    ("../no-such-env-here", InvalidURL, "no such directory"),
    ("/data/no-such-env", InvalidURL, r"'/data/no-such-env': no such directory"),
    ("~/no-such-openenv-env", InvalidURL, "no such directory"),
    ("htp://host", InvalidURL, "unsupported scheme 'htp'"),
    ("my-env", InvalidURL, "a Docker image needs its tag: my-env:latest"),
    (
        "{empty}",
        CheckoutNotRunnable,
        r"this directory is not an OpenEnv environment \(no openenv.yaml, no server/app.py\)",
    ),
    # a Docker image: started with Docker (none answers here; a pool reports it per server)
    ("my-env:latest", (DockerUnavailable, BootstrapError), "no Docker engine answered"),
    ("docker:my-env", (DockerUnavailable, BootstrapError), "no Docker engine answered"),
]


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize(("target", "error", "message"), CASES, ids=[case[0] for case in CASES])
def test_every_entry_point_reads_a_target_the_same_way(
    entry: str, target: str, error: Any, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker-here.sock")  # no engine: fails at once
    if target == "{empty}":
        target = str(tmp_path / "empty")
        (tmp_path / "empty").mkdir()
    with pytest.raises(error, match=message):
        ENTRY_POINTS[entry](target)


ECHO_IMAGE = "openenv-test/echo:latest"


def _ours(engine: Any) -> list[Any]:
    import os

    # filtered by our PID in the engine: another worker may remove its own containers while a listing inspects them
    mine = f"org.openenv.pid={os.getpid()}"
    found = engine.containers.list(all=True, filters={"label": ["org.openenv.managed=1", mine]})
    return [c for c in found if c.labels.get("org.openenv.pid") == str(os.getpid())]


@pytest.mark.docker
def test_an_image_target_starts_the_image_from_every_entry_point(docker_engine: Any) -> None:
    cls = environment_factory(ECHO_IMAGE, ready_timeout=60)
    try:
        assert "message" in inspect.signature(cls.step).parameters  # the real schema of the container's server
        instance = cls()
        instance.reset()
        assert "typed" in instance.step(message="typed")
        instance.close()
    finally:
        cls.close()
    with Env.from_schema(ECHO_IMAGE, ready_timeout=60) as env:
        assert (env.step({"message": "hi"})).observation.echoed_message == "hi"
    with Env.from_env("docker:" + ECHO_IMAGE, ready_timeout=60) as env:
        assert env.provider is not None
    assert _ours(docker_engine) == []
