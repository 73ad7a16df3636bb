"""OpenEnv 0.10's own provider objects (``UVProvider``, ``LocalDockerProvider``, ``DockerSwarmProvider``) given to us.

They run in a venv holding the released ``openenv==0.10.0`` and our checkout
(``pip install -e``, beside it: CONTRIBUTING "Editable installs") and
OpenEnv's environment package ``openenv-echo-env`` (``tests/openenv_envs/echo_env``),
``providers-0.10.0`` under ``$OPENENV_INTEROP_VENVS`` (built once, by the
interop session while it installs, or here); ``providers_driver.py`` drives
them there, in a subprocess, and prints what happened.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ..conftest import OPENENV_ENVS
from .conftest import ROOT, VENVS, record

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("interop-openenv-providers")]

DRIVER = Path(__file__).with_name("providers_driver.py")
VENV = "providers-0.10.0"
ECHO_IMAGE = "openenv-test/echo:latest"


def _uv_dir() -> str | None:
    """The folder of a ``uv`` executable (UVProvider's constructor insists on one on PATH)."""
    found = shutil.which(os.environ.get("OPENENV_TEST_UV") or "uv") or next(
        (str(p) for p in (Path(sys.executable).parent / "uv", Path(sys.base_prefix) / "bin" / "uv") if p.exists()),
        None,
    )
    if found is None:
        try:
            import uv  # type: ignore[import-not-found]

            found = uv.find_uv_bin()
        except (ImportError, FileNotFoundError):
            return None
    return str(Path(found).parent)


@pytest.fixture(scope="module")
def providers_python() -> Path:
    """The venv's Python: openenv 0.10.0, then our checkout, editable (once; a marker file)."""
    VENVS.mkdir(parents=True, exist_ok=True)
    venv = VENVS / VENV
    python = venv / "bin" / "python"
    with open(VENVS / f"{VENV}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".openenv-installed").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "openenv==0.10.0"], check=True)
            (venv / ".openenv-installed").write_text("openenv==0.10.0")
        if not (venv / ".ours-editable").exists():
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[docker]"], check=True)
            (venv / ".ours-editable").write_text(str(ROOT))
        if not (venv / ".echo-env-installed").exists():  # OpenEnv's envs/echo_env, built from a copy (not in-tree)
            with tempfile.TemporaryDirectory() as build:
                shutil.copytree(OPENENV_ENVS / "echo_env", Path(build) / "echo_env")
                pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(Path(build) / "echo_env")]
                subprocess.run(pip, check=True)
            (venv / ".echo-env-installed").write_text("openenv-echo-env from tests/openenv_envs/echo_env")
    return python


def _drive(python: Path, checkout: str, image: str, echo: str, tmp_path: Path) -> dict[str, Any]:
    uv = _uv_dir()
    if checkout and uv is None:
        pytest.skip("no uv executable: OpenEnv's UVProvider refuses to be constructed without one")
    env = {**os.environ, "PATH": f"{uv}{os.pathsep}{os.environ.get('PATH', '')}" if uv else os.environ["PATH"]}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(python), str(DRIVER), checkout, image, echo],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _echo_image() -> str:
    """``ECHO_IMAGE`` when Docker has it, else ``""`` (the Docker part is then skipped, and says so)."""
    from openenv._blocking.docker import connect_client  # closes its socket when the engine does not answer

    try:
        engine = connect_client(30)
    except Exception:  # noqa: BLE001 - no engine
        return ""
    try:
        engine.images.get(ECHO_IMAGE)
    except Exception:  # noqa: BLE001 - no image
        return ""
    finally:
        engine.close()
    return ECHO_IMAGE


def test_openenv_providers_unchanged(providers_python: Path, tmp_path: Path) -> None:
    """UVProvider, DockerSwarmProvider and (with Docker and the echo image) LocalDockerProvider, in one driver run.

    One run: the driver imports openenv 0.10's ``openenv.core`` (gradio), 12 s on a loaded machine.
    """
    checkout = tmp_path / "checkout_echo"
    shutil.copytree(OPENENV_ENVS / "checkout_echo", checkout)
    # the project's own .venv (what the translated provider runs first): this venv, so that no `uv run`
    # creates and fills one here (a minute of installing; `uv run --project` is the next choice)
    (checkout / ".venv").symlink_to(providers_python.parent.parent)
    image = _echo_image()
    # OpenEnv's envs/echo_env (tests/openenv_envs/echo_env), installed in the venv as openenv-echo-env
    echo = tmp_path / "echo_project"  # not "echo_env": a directory of that name in the cwd would be the target
    shutil.copytree(OPENENV_ENVS / "echo_env", echo)
    (echo / ".venv").symlink_to(providers_python.parent.parent)
    out = _drive(providers_python, str(checkout), image, str(echo), tmp_path)
    # UVProvider: our checkout provider, in its project directory, on 127.0.0.1, registered for prune
    assert out["uv_provider"] == "CheckoutProvider"
    assert out["uv_url"].startswith("http://127.0.0.1:")
    assert out["uv_cwd"] == str(checkout) and out["uv_env"] == "uv" and out["uv_registered"]
    assert out["uv_step"]["echoed_message"] == "HI"
    assert out["uv_left"] == []
    assert "DockerSwarmProvider is not supported" in out["swarm"] and "swarm init" in out["swarm"]
    assert "may have switched" in out["swarm"]  # its constructor was not run here
    record("ours (sync)", "openenv 0.10.0 UVProvider", "translated to CheckoutProvider")
    record("ours (sync)", "openenv 0.10.0 DockerSwarmProvider", "refused", "refused", "switches the engine to swarm")
    # the environment package by name: its default image, or base_url= typed with its own client
    assert out["pkg_target"] == ["image", "echo-env:latest", "openenv-echo-env"]
    for name in ("echo", "echo_env", "openenv-echo-env"):
        assert out[f"pkg_codec_{name}"] == "Codec.from_client(EchoEnv)"
    assert out["pkg_tools"] == ["echo_message", "echo_with_length"] and out["pkg_call"] == "by name"
    record("ours (sync)", "openenv-echo-env (OpenEnv's envs/echo_env)", "from_env(name, base_url=...)")
    if not image:
        record("ours (sync)", "openenv 0.10.0 LocalDockerProvider", "translated", "skipped", f"no {ECHO_IMAGE}")
        return
    assert out["docker_provider"] == "DockerProvider" and out["docker_labels"] == "1"
    assert out["docker_bindings"] == {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}
    assert out["docker_step"]["echoed_message"] == "docker"
    assert out["docker_left"] == []
    assert "needs an image" in out["docker_no_image"] and "EnvPool.from_docker_image" in out["docker_no_image"]
    assert out["docker_pool_providers"] == ["DockerProvider"] and out["docker_pool_step"] == ["a", "a"]
    assert out["docker_pool_left"] == []
    record("ours (sync)", "openenv 0.10.0 LocalDockerProvider", "translated to DockerProvider")
