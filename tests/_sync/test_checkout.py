# GENERATED from tests/_async/test_checkout.py by scripts/run_unasync.py -- DO NOT EDIT.
"""``from_env(checkout)`` runs a real OpenEnv environment checkout, or says exactly what to do."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from openenv.sync import CheckoutNotRunnable, Env

CHECKOUT = Path(__file__).resolve().parent.parent / "openenv_envs" / "checkout_echo"


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "checkout_echo"
    shutil.copytree(CHECKOUT, target)
    return target


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
        child = provider._child
        assert child is not None and child.exit_code() is None
    assert child.exit_code() is not None


@pytest.mark.interop
def test_a_pool_runs_one_process_per_session_from_a_checkout(tmp_path: Path) -> None:
    from openenv.sync import EnvPool
    from tests.interop.conftest import venv_python

    released = venv_python("0.3.0").parent.parent
    checkout = _copy(tmp_path)
    (checkout / ".venv").symlink_to(released, target_is_directory=True)
    with EnvPool.from_env(str(checkout), size=3, ready_timeout=120) as pool:
        children = [provider._child for provider in pool.providers]  # type: ignore[union-attr]
        assert len({child.pid for child in children if child is not None}) == 3  # three servers
        pool.reset()
        results = pool.step([{"message": f"s{i}"} for i in range(3)])
        assert [r.observation["echoed_message"] for r in results] == ["S0", "S1", "S2"]
    assert all(child is not None and child.exit_code() is not None for child in children)
