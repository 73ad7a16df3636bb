# GENERATED from tests/_async/test_env_packages.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Environments found by name, as OpenEnv's ``AutoEnv`` finds them: installed ``openenv-*`` packages."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.sync import Env, EnvPool, InvalidURL
from openenv.server import EnvServer

from ..env_packages import install_env_package
from ..envs import CounterAction, CounterObservation
from ..openenv_shaped import ContainerLike

COUNTER_CLIENT = "from tests.envs import CounterClient as CounterEnv\n"


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site folder holding ``openenv-counter-env`` (its client typed) and ``openenv-broken-env`` (no client)."""
    site = tmp_path / "site"
    site.mkdir()
    install_env_package(
        site, "openenv-counter-env", "counter_env", COUNTER_CLIENT, "spec_version: 1\nname: counter_env\n"
    )
    install_env_package(site, "openenv-broken-env", "broken_env")
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name, module in list(sys.modules.items()):  # a later test's package of the same name is imported afresh
        if str(getattr(module, "__file__", None) or "").startswith(str(site)):
            del sys.modules[name]


@pytest.mark.parametrize("name", ["counter", "counter-env", "counter_env", "openenv-counter-env"])
def test_a_package_by_name_connects_to_base_url_typed_with_its_client(
    packages: Path, counter_server: EnvServer, name: str
) -> None:
    with Env.from_env(name, base_url=counter_server.url) as env:
        result = env.reset()
        assert isinstance(result.observation, CounterObservation)
        assert (env.step(CounterAction(delta=2))).observation.count == 2


def test_a_package_by_name_on_an_openenv_provider_runs_its_image_typed_with_its_client(packages: Path) -> None:
    provider = ContainerLike()
    with Env.from_env("counter", provider=provider, ready_timeout=30) as env:
        assert provider.image == "counter-env:latest"  # the package's default image, given to start_container
        result = env.reset()
        assert isinstance(result.observation, CounterObservation)
        assert (env.step(CounterAction(delta=3))).observation.count == 3
    assert not provider.running


def test_base_url_and_provider_together_are_refused_before_anything_starts(
    packages: Path, counter_server: EnvServer
) -> None:
    provider = ContainerLike()
    with pytest.raises(TypeError, match="base_url=.*or provider=.*not both"):
        Env.from_env("counter", base_url=counter_server.url, provider=provider)
    assert provider.calls == []


def test_a_package_whose_client_does_not_import_gives_dicts(packages: Path, counter_server: EnvServer) -> None:
    with Env.from_env("broken", base_url=counter_server.url) as env:
        assert isinstance((env.reset()).observation, dict)


def test_an_unknown_name_lists_the_installed_packages_and_how_to_install(packages: Path) -> None:
    with pytest.raises(InvalidURL) as info:
        Env.from_env("chess")
    message = str(info.value)
    assert "counter (openenv-counter-env)" in message and "broken (openenv-broken-env)" in message
    assert "pip install openenv-chess-env" in message and "subdirectory=envs/chess_env" in message
    assert "chess:latest, or docker:chess" in message


def test_a_package_name_runs_its_default_image(packages: Path, tmp_path: Path) -> None:
    # no Docker needed to see which image it picks: the provider is made, then fails to reach an engine or image
    from openenv._blocking.sources import classify_source

    where = classify_source("counter-env")
    assert (where.kind, where.target) == ("image", "counter-env:latest")
    assert where.package is not None and where.package.client == "counter_env.client:CounterEnv"
    site = tmp_path / "site2"
    install_env_package(site, "openenv-tagged-env", "tagged_env", "", "name: tagged_env\nimage: team/tagged:v3\n")
    import sys

    sys.path.insert(0, str(site))
    try:
        assert classify_source("tagged").target == "team/tagged:v3"
    finally:
        sys.path.remove(str(site))


@pytest.mark.docker
def test_a_package_name_starts_its_image(packages: Path, docker_engine: Any) -> None:
    # its manifest names the image (else it would be echo-env:latest): the test image scripts/docker_setup.py builds
    manifest = "spec_version: 1\nname: echo_env\nimage: openenv-test/echo:latest\n"
    install_env_package(packages, "openenv-echo-env", "echo_env", "", manifest)
    with Env.from_env("echo-env", ready_timeout=120) as env:
        assert env.provider is not None and getattr(env.provider, "image", None) == "openenv-test/echo:latest"
        env.reset()
        assert (env.step({"message": "by name"})).observation["echoed_message"] == "by name"


ECHO_CLIENT = """\
from openenv.server.echo import EchoAction, EchoObservation, EchoState
from tests.envs import ReleasedEnvClient, ReleasedStepResult


class EchoEnv(ReleasedEnvClient[EchoAction, EchoObservation, EchoState]):
    def _step_payload(self, action):
        return {"message": action.message}

    def _parse_result(self, payload):
        obs = payload.get("observation", {})
        observation = EchoObservation(
            echoed_message=obs.get("echoed_message", ""), message_length=obs.get("message_length", 0)
        )
        reward, done = payload.get("reward"), payload.get("done", False)
        return ReleasedStepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload):
        return EchoState(episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0))
"""


@pytest.mark.docker
def test_a_pool_of_a_package_by_name_runs_its_image_typed_with_its_client(
    packages: Path, docker_engine: Any
) -> None:
    from openenv.server.echo import EchoAction, EchoObservation

    manifest = "spec_version: 1\nname: echo_env\nimage: openenv-test/echo:latest\n"
    install_env_package(packages, "openenv-echo-env", "echo_env", ECHO_CLIENT, manifest)
    with EnvPool.from_env("echo-env", size=1, ready_timeout=120) as pool:
        pool.reset()
        (result,) = pool.step([EchoAction(message="pooled")])  # type: ignore[list-item]  # typed at runtime
        assert isinstance(result.observation, EchoObservation)
        assert result.observation.echoed_message == "pooled"
