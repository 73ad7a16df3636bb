# GENERATED from tests/_async/test_foreign.py by scripts/run_unasync.py -- DO NOT EDIT.
"""OpenEnv's provider shapes accepted unchanged: OpenEnv-shaped providers written in the tests, our real servers."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from openenv._blocking.external import list_external
from openenv._core.urls import redact_url
from openenv.sync import Env, EnvPool, OpenEnvProvider, ProviderError, ReadinessTimeout, environment_factory

from ..helpers_sync import gather, run_in_thread, until
from ..openenv_shaped import ContainerLike, RuntimeLike


def test_a_runtime_provider_runs_an_episode_unchanged() -> None:
    upstream = RuntimeLike()
    env = Env.from_provider(upstream, ready_timeout=30)
    try:
        assert isinstance(env.provider, OpenEnvProvider)
        assert upstream.calls == ["start", "wait_for_ready(30.0)"]
        env.reset(start=2)
        assert (env.step({"delta": 3})).observation["count"] == 5
        # the whole URL is a secret: no repr or redaction shows any of it
        assert upstream.url is not None and upstream.url.split("//")[1] not in repr(env)
        assert redact_url(env.base_url) == "<RuntimeLike URL hidden>"
        assert "RuntimeLike URL hidden" in repr(env)
    finally:
        env.close()
    assert upstream.calls[-2:] == ["stop", "close"]
    assert not upstream.running
    env.close()  # idempotent: the provider is not stopped twice
    assert upstream.calls.count("stop") == 1


def test_a_container_provider_takes_the_image_in_every_constructor() -> None:
    first = ContainerLike()
    env = Env.from_docker_image("team/echo:v1", provider=first, env_vars={"A": "1"}, ready_timeout=30)
    with env:
        env.reset()
    assert first.image == "team/echo:v1" and first.start_kwargs["env_vars"] == {"A": "1"}
    assert first.calls[-2:] == ["stop_container", "close"] and not first.running

    second = ContainerLike()
    with Env.from_env("docker:team/echo:v2", provider=second, ready_timeout=30) as env:
        env.reset()
    assert second.image == "team/echo:v2" and not second.running

    third = ContainerLike()
    with Env.from_provider(OpenEnvProvider(third, image="hf://owner/space"), ready_timeout=30) as env:
        env.reset()
    assert third.image == "hf://owner/space" and not third.running


def test_a_container_provider_without_an_image_says_how_to_give_one() -> None:
    upstream = ContainerLike()
    with pytest.raises(TypeError, match=r"needs an image.*from_docker_image\(image, provider=p\)"):
        Env.from_provider(upstream)
    assert upstream.calls == []


def test_anything_else_is_refused_naming_the_shapes_and_what_is_missing() -> None:
    class HalfRuntime:
        def start(self) -> str:
            return "http://127.0.0.1:1"

        def stop(self) -> None:
            pass

    with pytest.raises(TypeError) as info:
        Env.from_provider(HalfRuntime())
    message = str(info.value)
    assert "ContainerProvider" in message and "RuntimeProvider" in message and "openenv.sync.Provider" in message
    assert "lacks wait_for_ready" in message or "lacks wait_until_ready" in message
    with pytest.raises(TypeError, match="is not a provider"):
        Env.from_provider(object())


def test_readiness_errors_become_ours_with_the_cause_kept() -> None:
    late = RuntimeLike(fail_ready=TimeoutError("Server did not become ready within 2.0 seconds"))
    with pytest.raises(ReadinessTimeout) as info:
        Env.from_provider(late, ready_timeout=2)
    assert isinstance(info.value.__cause__, TimeoutError)
    assert not late.running and "stop" in late.calls

    broken = RuntimeLike(fail_ready=RuntimeError("uv process exited prematurely with code 1"))
    with pytest.raises(ProviderError, match="wait_for_ready failed: RuntimeError: uv process exited") as caught:
        Env.from_provider(broken, ready_timeout=30)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert not broken.running and "stop" in broken.calls


def test_a_readiness_error_naming_the_urls_parts_apart_hides_them() -> None:
    # what requests says for a sandbox that never answers: the host and the path, each on its own
    said = ConnectionError("HTTPConnectionPool(host='127.0.0.1', port=1): Max retries exceeded with url: /cap-s3cr3t/x")
    upstream = RuntimeLike(prefix="/cap-s3cr3t", fail_ready=said)
    with pytest.raises(ProviderError, match="wait_for_ready failed: ConnectionError: HTTPConnectionPool") as info:
        Env.from_provider(upstream, ready_timeout=30)
    assert "s3cr3t" not in str(info.value) and "<hidden>/x" in str(info.value)


def test_a_failed_start_still_runs_the_providers_stop() -> None:
    upstream = RuntimeLike(fail_start=RuntimeError("quota exceeded"))
    with pytest.raises(ProviderError, match="RuntimeLike failed to start: RuntimeError: quota exceeded") as info:
        Env.from_provider(upstream, ready_timeout=30)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert upstream.calls[-2:] == ["stop", "close"]  # it may hold half a sandbox


def test_every_cleanup_error_is_raised_and_none_skips_the_others() -> None:
    upstream = RuntimeLike(fail_stop=RuntimeError("SandboxDeletionError: busy"), fail_close=OSError("client gone"))
    env = Env.from_provider(upstream, ready_timeout=30)
    url = upstream.url
    assert url is not None
    with pytest.raises(ProviderError) as info:
        env.close()
    message = str(info.value)
    assert "2 error(s)" in message and "SandboxDeletionError: busy" in message and "client gone" in message
    assert len(info.value.errors) == 2  # type: ignore[attr-defined]
    assert upstream.calls[-2:] == ["stop", "close"] and not upstream.running
    assert url.split("//")[1] not in message


def test_a_path_prefixed_url_keeps_its_prefix_for_the_websocket() -> None:
    upstream = RuntimeLike(prefix="/sandbox/cap-7f3a")
    with Env.from_provider(upstream, ready_timeout=30) as env:
        assert env.base_url.endswith("/sandbox/cap-7f3a")
        env.reset(start=1)
        assert (env.step({"delta": 1})).observation["count"] == 2
        assert "cap-7f3a" not in repr(env)
    assert not upstream.running
    assert "cap-7f3a" not in repr(env)  # a capability stays hidden after the close


def test_a_running_provider_is_recorded_for_prune_until_stopped() -> None:
    upstream = RuntimeLike()
    before = {r.path for r in list_external()}  # other tests' records (other workers share the folder)
    with Env.from_provider(upstream, ready_timeout=30):
        mine = [r for r in list_external() if r.path not in before and r.owner_pid == os.getpid()]
        assert len(mine) == 1 and mine[0].provider.endswith("RuntimeLike") and mine[0].owner_alive
        assert "127.0.0.1" not in mine[0].description
        path = mine[0].path
    assert path not in [r.path for r in list_external()]


def test_a_pool_of_openenv_providers() -> None:
    made: list[RuntimeLike] = []

    def factory(index: int) -> RuntimeLike:
        made.append(RuntimeLike())
        return made[-1]

    with EnvPool.from_provider(factory, size=2, ready_timeout=30) as pool:
        results = pool.reset()
        assert len(results) == 2
        assert all(isinstance(p, OpenEnvProvider) for p in pool.providers)
    assert len(made) == 2 and not any(p.running for p in made)


def test_concurrent_starts_are_capped_on_request() -> None:
    gate = threading.Event()
    made: list[RuntimeLike] = []

    def factory(index: int) -> OpenEnvProvider:
        made.append(RuntimeLike(hold_start=gate))
        return OpenEnvProvider(made[-1], max_concurrent_starts=1)

    def open_pool() -> Any:
        return EnvPool.from_provider(factory, size=2, ready_timeout=30)

    def release() -> None:
        until(lambda: len(made) == 2 and any(p.in_start.is_set() for p in made))
        assert sum(p.in_start.is_set() for p in made) == 1  # the other waits for its turn
        gate.set()

    pool, released = gather(open_pool, release, stagger=0)
    for outcome in (pool, released):
        if isinstance(outcome, BaseException):
            raise outcome
    with pool:
        assert all(p.in_start.is_set() for p in made)
    assert not any(p.running for p in made)


def test_a_stop_during_the_start_cleans_up_when_the_start_returns() -> None:
    gate = threading.Event()
    upstream = RuntimeLike(hold_start=gate)
    provider = OpenEnvProvider(upstream)

    def start() -> Any:
        with pytest.raises(ProviderError, match="stopped while it started"):
            provider.start()

    def stop_then_release() -> None:
        run_in_thread(lambda: upstream.in_start.wait(30))
        provider.stop()  # returns at once: the start is still running
        assert "stop" not in upstream.calls
        gate.set()

    for outcome in gather(start, stop_then_release, stagger=0):
        if isinstance(outcome, BaseException):
            raise outcome
    until(lambda: "stop" in upstream.calls)
    assert not upstream.running


def test_environment_factory_takes_an_openenv_provider() -> None:
    upstream = ContainerLike()
    cls = environment_factory("team/counter:v1", provider=upstream, name="Counter", ready_timeout=30)
    try:
        assert upstream.image == "team/counter:v1"
        instance = cls()
        instance.reset()
        instance.close()
    finally:
        cls.close()
    assert not upstream.running
