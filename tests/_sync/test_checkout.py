# GENERATED from tests/_async/test_checkout.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``from_env(checkout)`` runs a real OpenEnv environment checkout, or says exactly what to do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from openenv.sync import CheckoutNotRunnable, Env

ENVS = Path(__file__).resolve().parent.parent / "openenv_envs"
CHECKOUT = ENVS / "checkout_echo"


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists (a stopped server is also reaped: no zombie stays)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, another user's (the PID was reused)
        return True
    return True


def _copy(tmp_path: Path, name: str = "checkout_echo", as_name: str | None = None) -> Path:
    target = tmp_path / (as_name or name)
    shutil.copytree(ENVS / name, target)
    return target


def _without_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the current interpreter runs the checkout (the test venv has uvicorn and our ASGI server)
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv-here"))


def test_a_checkout_nothing_can_run_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = _copy(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv-here"))
    with pytest.raises(CheckoutNotRunnable) as info:
        Env.from_env(str(checkout), ready_timeout=30)
    message = str(info.value)
    venv = checkout / ".venv"
    assert f"python -m venv {venv} && {venv}/bin/pip install -e {checkout}" in message
    assert "pip install uv" in message and "install=True" in message and "command=[...]" in message
    # the test venv has neither uvicorn nor openenv.core: the probe's last error line is quoted
    assert "No module named" in message and info.value.probe_error in message
    assert not venv.exists()


@pytest.mark.interop
def test_a_checkout_runs_with_its_own_venv(tmp_path: Path) -> None:
    from tests.interop.conftest import venv_python

    released = venv_python("0.3.0").parent.parent  # openenv-core 0.3.0's venv stands in for the checkout's own
    checkout = _copy(tmp_path)
    (checkout / ".venv").symlink_to(released, target_is_directory=True)
    with Env.from_env(str(checkout), ready_timeout=120) as env:
        provider: Any = env.provider
        assert provider is not None
        command = provider.command
        assert command[0] == str(checkout / ".venv" / "bin" / "python")
        assert command[-2] == "--fd"  # a socket bound by the client, no port race
        env.reset()
        result = env.step({"message": "hello"})
        assert result.observation["echoed_message"] == "HELLO"
        assert result.reward == pytest.approx(0.5)
        pid = provider.pid
        assert pid is not None and _running(pid)
    assert provider.pid is None
    assert not _running(pid)  # stopped and reaped on close


@pytest.mark.interop
def test_a_pool_runs_one_process_per_session_from_a_checkout(tmp_path: Path) -> None:
    from openenv.sync import EnvPool
    from tests.interop.conftest import venv_python

    released = venv_python("0.3.0").parent.parent
    checkout = _copy(tmp_path)
    (checkout / ".venv").symlink_to(released, target_is_directory=True)
    # two sessions: a second server shows it as well as a third (an openenv-core server costs 5-7 s of CPU to start)
    with EnvPool.from_env(str(checkout), size=2, ready_timeout=120) as pool:
        pids = [provider.pid for provider in pool.providers]  # type: ignore[union-attr]
        assert len(set(pids)) == 2 and all(pid is not None and _running(pid) for pid in pids)  # two servers
        pool.reset()
        results = pool.step([{"message": f"s{i}"} for i in range(2)])
        assert [r.observation["echoed_message"] for r in results] == ["S0", "S1"]
    assert not any(_running(pid) for pid in pids if pid is not None)


@pytest.mark.parametrize("name", ["solo_echo", "solo-checkout"])
def test_a_checkout_that_imports_relative_to_its_package_runs_as_its_dockerfile_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # solo_echo's server/solo_environment.py does `from ..models import ...` (as OpenEnv's chess,
    # wildfire and grid_world do): imported as the manifest's server.app it fails with "attempted
    # relative import beyond top-level package"; as solo_echo.server.app (pyproject's package-dir) it
    # imports, from the checkout's parent, or through a link when the directory has another name
    checkout = _copy(tmp_path, "solo_echo", as_name=name)
    _without_uv(tmp_path, monkeypatch)
    with Env.from_env(str(checkout), ready_timeout=60) as env:
        provider: Any = env.provider
        assert provider.served_app == "solo_echo.server.app:app"
        assert "app='solo_echo.server.app:app'" in repr(provider)
        assert provider.command[-4:-2] == ["uvicorn", "solo_echo.server.app:app"]
        env.reset()
        result = env.step({"message": "hi"})
        assert result.observation["echoed_message"] == "hi"


def test_env_vars_reach_the_probe_of_the_current_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gated_echo's server/app.py raises at import without GATED_ECHO_TOKEN (as textarena reads its
    # settings at import): the probe imports it with the server's environment, env_vars included
    checkout = _copy(tmp_path, "gated_echo")
    _without_uv(tmp_path, monkeypatch)
    monkeypatch.delenv("GATED_ECHO_TOKEN", raising=False)
    with pytest.raises(CheckoutNotRunnable) as info:
        Env.from_env(str(checkout), ready_timeout=60)
    assert "GATED_ECHO_TOKEN is not set" in info.value.probe_error
    with Env.from_env(str(checkout), env_vars={"GATED_ECHO_TOKEN": "t"}, ready_timeout=60) as env:
        provider: Any = env.provider
        assert provider.served_app == "server.app:app"  # the declared app: nothing to change
        env.reset()
        assert (env.step({"message": "gate"})).observation["echoed_message"] == "gate"


@pytest.mark.interop
@pytest.mark.parametrize("name", ["grid_world_env", "my-grid"])
def test_an_openenv_grid_world_checkout_runs_on_the_released_server(tmp_path: Path, name: str) -> None:
    # laid out as OpenEnv's envs/grid_world_env: openenv.yaml says server.app:app, server/app.py does
    # `from ..models import ...`; served by openenv-core 0.3.0 (its venv stands in for the checkout's)
    from tests.interop.conftest import venv_python

    released = venv_python("0.3.0").parent.parent
    checkout = _copy(tmp_path, "grid_world_env", as_name=name)
    (checkout / ".venv").symlink_to(released, target_is_directory=True)
    with Env.from_env(str(checkout), ready_timeout=120) as env:
        provider: Any = env.provider
        assert provider.served_app == "grid_world_env.server.app:app"
        assert provider.command[0] == str(checkout / ".venv" / "bin" / "python")
        first = env.reset()
        assert first.observation["message"].startswith("Welcome to Grid World")
        moves = ["DOWN"] * 4 + ["RIGHT"] * 4
        results = [env.step({"action": move}) for move in moves]
        assert [r.reward for r in results] == [pytest.approx(-0.1)] * 7 + [1.0]
        assert results[-1].done and (results[-1].observation["x"], results[-1].observation["y"]) == (4, 4)
