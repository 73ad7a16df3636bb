"""Our wheel and the released openenv-core 0.3.0 installed in ONE venv, and each alone.

The venvs live beside the released ones (``$OPENENV_INTEROP_VENVS``):
``both-0.3.0`` (openenv-core 0.3.0, then our wheel), ``editable-0.3.0``
(openenv-core 0.3.0, then ``pip install -e``) and ``ours-only``; each is created
once (marker files; ``nox -s interop`` builds the openenv-core ones while it
installs, see the noxfile's INTEROP_VENVS) and gets this tree's code every run.
``both_driver.py`` runs in the shared venv: the environments' own
``client.py``/``models.py`` (importing ``openenv.core``) beside ``openenv.sync``.
Then each package is uninstalled in turn: the other must keep working.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import OPENENV_ENVS, VENV_ENVS_GROUP
from .conftest import ROOT, VENVS, record

#: the tests that change the shared venvs hold ``locked_venvs`` one at a time: on one xdist worker
#: they run one after the other, instead of one worker waiting on the lock while another works
pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("interop-shared-venvs")]


def _run(*command: str | Path, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="session")
def our_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our wheel, built from the working tree (``pip wheel --no-deps``)."""
    out = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "HATCH_BUILD_NO_HOOKS": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("openenv_twin-*.whl")
    return wheel


def _venv(name: str, *packages: str) -> Path:
    """A venv under VENVS with ``packages`` (created once; marker file)."""
    venv = VENVS / name
    python = venv / "bin" / "python"
    marker = venv / ".openenv-installed"
    if not marker.exists():
        _run(sys.executable, "-m", "venv", venv)
        if packages:
            _run(python, "-m", "pip", "install", "--quiet", *packages)
        marker.write_text(" ".join(packages))
    return python


@pytest.fixture
def locked_venvs() -> Iterator[None]:
    """One test at a time changes these shared venvs (other pytest runs may use them too)."""
    VENVS.mkdir(parents=True, exist_ok=True)
    with open(VENVS / "both-venvs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _install_ours(python: Path, wheel: Path) -> None:
    _run(python, "-m", "pip", "install", "--quiet", wheel)  # with its dependencies (once)
    _run(python, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", wheel)  # this tree's code


def _py(python: Path, code: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(python, "-c", code, *args, check=check)


OURS_WORK = """
import sys, importlib.util
from openenv.sync import Env
import openenv.aio
with Env(sys.argv[1]) as env:
    env.reset(seed=3)
    r = env.step({"type": "call_tool", "tool_name": "guess", "arguments": {"number": 50}})
    assert r.observation["result"]["data"] in ("higher", "lower", "correct: the number was 50"), r
    assert env.state()["step_count"] == 1
print(importlib.util.find_spec("openenv.core") is None)
"""

THEIRS_WORK = """
import sys, importlib.util
sys.path.insert(0, sys.argv[2])
import openenv.core.env_server
from mcp_guess.client import MCPGuessEnv
env = MCPGuessEnv(base_url=sys.argv[1]).sync()
with env:
    env.reset(seed=3)
    assert env.call_tool("guess", number=50) in ("higher", "lower", "correct: the number was 50")
    assert env.state().step_count == 1
print(importlib.util.find_spec("openenv.sync") is None)
"""


@pytest.mark.xdist_group(VENV_ENVS_GROUP)  # the servers of openenv_venv_envs: on one worker
def test_both_in_one_venv_then_each_uninstalled(openenv_venv_envs: Any, our_wheel: Path, locked_venvs: None) -> None:
    guess, duel = openenv_venv_envs.url("mcp_guess"), openenv_venv_envs.url("duel")
    python = _venv("both-0.3.0", "openenv-core==0.3.0")
    _run(python, "-m", "pip", "install", "--quiet", "openenv-core==0.3.0")  # back if a run was interrupted
    _install_ours(python, our_wheel)
    try:
        # generous: the driver imports both stacks (openenv-core's alone is 5-7 s of CPU) and runs both command
        # lines; beside CI's other lanes on two cores it took more than 300 s; it stops by itself otherwise
        done = _run(python, Path(__file__).parent / "both_driver.py", guess, duel, OPENENV_ENVS, timeout=900)
        out = json.loads(done.stdout.strip().splitlines()[-1])["result"]
        assert out["theirs_guess"] == out["ours_guess"] and out["theirs_guess"] in ("higher", "lower")
        assert out["theirs_guess_state"] == out["ours_guess_state"] == ["GuessState", 1, [50]]
        assert out["ours_tools"] == ["guess", "hint"]
        assert out["theirs_duel"] == out["ours_duel"]
        assert [step[0] for step in out["ours_duel"]] == ["RoundObservation", "GameOverObservation"]
        assert out["ours_duel"][1][2:] == [-1.0, True]
        assert out["ours_duel_state"] == ["DuelState", True]
        assert out["core_env_answered_while_blocked"] is True  # our server: openenv-core's env blocked one session
        assert out["ours_cli"] == [0, True] and out["theirs_cli"] == [0, True]
        assert Path(out["core_file"]).parent.parent == Path(out["ours_file"]).parent.parent  # one openenv/
        record("ours+openenv-core in one venv", "openenv-core 0.3.0 (envs' own clients)", "side by side")

        # without our wheel, openenv-core (and its CLI) still work
        _run(python, "-m", "pip", "uninstall", "-y", "--quiet", "openenv-twin")
        assert _py(python, THEIRS_WORK, guess, str(OPENENV_ENVS)).stdout.split() == ["True"]
        _run(python.parent / "openenv", "--help")
        record("openenv-core alone after uninstalling ours", "openenv-core 0.3.0", "uninstall openenv-twin")

        # without openenv-core, ours still works (the namespace package is ours alone)
        _install_ours(python, our_wheel)
        _run(python, "-m", "pip", "uninstall", "-y", "--quiet", "openenv-core")
        assert _py(python, OURS_WORK, guess).stdout.split() == ["True"]
        assert "serve" in _run(python, "-m", "openenv", "--help").stdout
        record("ours alone after uninstalling openenv-core", "openenv-core 0.3.0", "uninstall openenv-core")
    finally:
        _run(python, "-m", "pip", "install", "--quiet", "openenv-core==0.3.0", check=False)


@pytest.mark.xdist_group(VENV_ENVS_GROUP)  # the servers of openenv_venv_envs: on one worker
def test_only_our_wheel(openenv_venv_envs: Any, our_wheel: Path, locked_venvs: None) -> None:
    guess = openenv_venv_envs.url("mcp_guess")
    python = _venv("ours-only")
    _install_ours(python, our_wheel)
    assert _py(python, OURS_WORK, guess).stdout.split() == ["True"]
    assert "serve" in _run(python, "-m", "openenv", "--help").stdout
    record("ours alone (wheel)", "openenv-core 0.3.0", "only our wheel")


USER_SCRIPT = """\
import openenv.core
from openenv.sync import Codec, Env, OpenEnvError

with Env("http://127.0.0.1:8000") as env:
    result = env.reset(seed=1)
    reveal_type(result)
    reveal_type(Codec)
    wrong: int = env.base_url
reveal_type(OpenEnvError)
"""


def test_type_checker_reads_our_types_not_openenv_cores(tmp_path: Path, our_wheel: Path, locked_venvs: None) -> None:
    """PEP 561 in the shared namespace: mypy, in a venv with openenv-core and our wheel, over a user's script.

    Our modules are typed (their types are revealed and a wrong use is an error);
    openenv-core's are not marked typed by us (it ships no ``py.typed`` of its own).
    """
    python = _venv("both-0.3.0", "openenv-core==0.3.0")
    _run(python, "-m", "pip", "install", "--quiet", "openenv-core==0.3.0")
    _install_ours(python, our_wheel)
    _run(python, "-m", "pip", "install", "--quiet", "mypy==2.4.1")  # the noxfile's MYPY pin
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [str(python), "-m", "mypy", "--strict", "--no-incremental", "--python-executable", str(python), script.name],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert 'Revealed type is "openenv._core.result.StepResult[dict[str, Any]]"' in out, out
    assert "openenv._core.codec.Codec[" in out and "-> openenv._core.errors.OpenEnvError" in out, out
    assert 'user_script.py:8: error: Incompatible types in assignment (expression has type "str"' in out, out
    untyped = [line for line in out.splitlines() if "[import-untyped]" in line]
    assert len(untyped) == 1 and 'Skipping analyzing "openenv.core"' in untyped[0], out
    assert "Found 2 errors in 1 file" in out, out
    record("mypy over a user script (ours typed, openenv-core not)", "openenv-core 0.3.0", "PEP 561 py.typed")


EDITABLE_WORKS = """
import json
import openenv.sync, openenv.aio, openenv.server.echo, openenv.core.env_server
print(json.dumps({"sync": openenv.sync.__file__, "aio": openenv.aio.__file__, "core": openenv.core.__file__}))
"""


def test_editable_install_beside_openenv_core(locked_venvs: None) -> None:
    """``pip install -e .`` in a venv that has openenv-core 0.3.0: ours from the checkout, theirs untouched.

    The build hook's import hook (scripts/hatch_build.py) finds our ``openenv.*``
    modules in ``src/`` although openenv-core's regular ``openenv`` package comes first.
    """
    python = _venv("editable-0.3.0", "openenv-core==0.3.0")
    _run(python, "-m", "pip", "install", "--quiet", "openenv-core==0.3.0")
    _run(python, "-m", "pip", "install", "--quiet", "-e", ROOT)
    try:
        out = json.loads(_py(python, EDITABLE_WORKS).stdout.strip().splitlines()[-1])
        src = ROOT / "src" / "openenv"
        assert Path(out["sync"]) == src / "sync" / "__init__.py" and Path(out["aio"]) == src / "aio" / "__init__.py"
        assert "site-packages" in Path(out["core"]).parts and not Path(out["core"]).is_relative_to(src)  # theirs
        sync_only = "import sys, openenv.sync; print('asyncio' in sys.modules)"
        assert _py(python, sync_only).stdout.split() == ["False"]  # the hook imports nothing heavy
        assert "serve" in _run(python, "-m", "openenv", "--help").stdout  # ours (openenv/__main__.py)
        _run(python.parent / "openenv", "--help")  # theirs
        record("ours editable (pip install -e .) beside openenv-core", "openenv-core 0.3.0", "editable install")
    finally:
        _run(python, "-m", "pip", "uninstall", "-y", "--quiet", "openenv-twin", check=False)
