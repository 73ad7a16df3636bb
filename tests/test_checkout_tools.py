"""``from_env(checkout)`` through ``uv run --project`` and with ``install=True`` (both fetch from PyPI: interop)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openenv.sync import Env

CHECKOUT = Path(__file__).resolve().parent / "openenv_envs" / "checkout_echo"

pytestmark = pytest.mark.interop


def _provider(env: Env) -> Any:
    return env.provider


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "checkout_echo"
    shutil.copytree(CHECKOUT, target)
    return target


def test_a_checkout_runs_through_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "uv-venv"
    given = os.environ.get("OPENENV_TEST_UV")  # the uv nox runs on (noxfile.py, interop): no venv to fill
    if given and os.access(given, os.X_OK):
        (tools / "bin").mkdir(parents=True)
        (tools / "bin" / "uv").symlink_to(given)
    else:
        subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
        done = subprocess.run(
            [str(tools / "bin" / "python"), "-m", "pip", "install", "--quiet", "uv"], capture_output=True, text=True
        )
        if done.returncode != 0 or not (tools / "bin" / "uv").exists():
            pytest.skip(f"uv could not be installed from PyPI: {done.stderr[-500:]}")
    checkout = _copy(tmp_path)
    monkeypatch.setenv("PATH", f"{tools / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    # uv's default, as a user has it: noxfile.py sets UV_COMPILE_BYTECODE=1 for its own venvs, and compiling all of
    # openenv-core's stack (gradio, FastAPI, ...) for a server started once cost 15 s more CPU than it saved
    monkeypatch.delenv("UV_COMPILE_BYTECODE", raising=False)
    with Env.from_env(str(checkout), ready_timeout=600) as env:
        command = _provider(env).command
        assert command[:4] == [str(tools / "bin" / "uv"), "run", "--project", str(checkout)]
        env.reset()
        assert env.step({"message": "uv"}).observation["echoed_message"] == "UV"


def test_install_creates_the_checkouts_venv(tmp_path: Path) -> None:
    checkout = _copy(tmp_path)
    with Env.from_env(str(checkout), install=True, ready_timeout=120) as env:
        assert _provider(env).command[0] == str(checkout / ".venv" / "bin" / "python")
        env.reset()
        assert env.step({"message": "pip"}).observation["echoed_message"] == "PIP"
    assert (checkout / ".venv" / "bin" / "python").exists()
