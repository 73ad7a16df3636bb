"""Run in a venv with the released openenv 0.10.0 AND our package: OpenEnv's own provider objects, given to us.

    python providers_driver.py CHECKOUT IMAGE ECHO_PROJECT

CHECKOUT is a copy of an OpenEnv environment checkout (``UVProvider``'s project),
IMAGE an echo image present locally (``""``: skip the Docker part), ECHO_PROJECT
a copy of OpenEnv's ``envs/echo_env``, installed in this venv as ``openenv-echo-env``
(``""``: skip that part).  Prints one
JSON object: what each provider became and what an episode through it gave.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import openenv.sync as ours
from openenv._blocking import process_registry
from openenv._blocking.procfs import process_start_time
from openenv.core.containers.runtime import providers as upstream  # type: ignore[import-untyped, unused-ignore]
from openenv.core.containers.runtime.uv_provider import UVProvider  # type: ignore[import-untyped, unused-ignore]

checkout, image, echo_project = sys.argv[1:4]
out: dict[str, Any] = {}


def uv_part() -> None:
    """UVProvider: translated to our checkout provider (its project, app and env_vars).

    One flavour only: each server imports openenv 0.10's openenv.core (gradio: 12 s on a loaded CI machine);
    the aio flavour translates through the same function (tests/_async/test_foreign.py, test_async_only.py).
    """
    uv = UVProvider(project_path=checkout, env_vars={"ECHO_PREFIX": "uv"})
    with ours.Env.from_provider(uv, ready_timeout=240) as env:
        provider: Any = env.provider
        out["uv_provider"] = type(provider).__name__
        out["uv_url"] = env.base_url
        out["uv_cwd"] = provider.cwd
        out["uv_env"] = provider.env.get("ECHO_PREFIX")
        pid = provider.pid
        # by PID and start time: PIDs wrap in a CI run, and a record another test's killed owner left may carry it
        name = (pid, process_start_time(pid))
        out["uv_registered"] = any((r.pid, r.start_time) == name for r in process_registry.list_records())
        env.reset()
        out["uv_step"] = env.step({"message": "hi"}).observation
    # this server's record (the registry folder is the user's: other suites' servers are in it too)
    out["uv_left"] = [r.pid for r in process_registry.list_records() if (r.pid, r.start_time) == name]


if checkout:
    uv_part()

# DockerSwarmProvider: refused, never constructed here (its constructor runs `docker swarm init`)
swarm = upstream.DockerSwarmProvider.__new__(upstream.DockerSwarmProvider)
try:
    ours.Env.from_docker_image("x:1", provider=swarm)
except ours.ProviderError as exc:
    out["swarm"] = str(exc)

if image:
    import docker

    engine = docker.from_env()
    local = upstream.LocalDockerProvider()
    with ours.Env.from_docker_image(image, provider=local, ready_timeout=240) as env:
        docker_provider: Any = env.provider
        out["docker_provider"] = type(docker_provider).__name__
        container = engine.containers.get(docker_provider.name)
        out["docker_labels"] = container.labels.get("org.openenv.managed")
        out["docker_bindings"] = container.attrs["HostConfig"]["PortBindings"]
        env.reset()
        out["docker_step"] = env.step({"message": "docker"}).observation
        name = docker_provider.name
    out["docker_left"] = [c.name for c in engine.containers.list(all=True, filters={"name": name})]
    # a pool of them, each wrapped with its image: ours too (OpenEnv's names its containers by the
    # millisecond, so that a pool's starting together collided)
    with ours.EnvPool.from_provider(
        lambda i: ours.OpenEnvProvider(upstream.LocalDockerProvider(), image=image), size=2, ready_timeout=240
    ) as pool:
        out["docker_pool_providers"] = sorted({type(p).__name__ for p in pool.providers})
        out["docker_pool_step"] = [r.observation["echoed_message"] for r in pool.step([{"message": "a"}] * 2)]
        pool_providers: list[Any] = pool.providers
        names = [provider.name for provider in pool_providers]
    out["docker_pool_left"] = [c.name for n in names for c in engine.containers.list(all=True, filters={"name": n})]
    # a LocalDockerProvider object for Env.from_provider alone: it needs its image
    try:
        ours.Env.from_provider(local)
    except TypeError as exc:
        out["docker_no_image"] = str(exc)
    engine.close()

if echo_project:
    # the environment package openenv-echo-env, found by name as AutoEnv finds it; served by UVProvider
    from openenv._blocking.sources import classify_source

    where = classify_source("echo-env")
    out["pkg_target"] = [where.kind, where.target, where.package.package if where.package else None]
    with ours.Env.from_provider(UVProvider(project_path=echo_project), ready_timeout=240) as served:
        for name in ("echo", "echo_env", "openenv-echo-env"):
            with ours.Env.from_env(name, base_url=served.base_url) as env:
                out[f"pkg_codec_{name}"] = repr(env.codec)
                env.reset()
                out["pkg_tools"] = sorted(t.name for t in env.list_tools())
                out["pkg_call"] = env.call_tool("echo_message", message="by name").content[0]["text"]

print(json.dumps(out))
