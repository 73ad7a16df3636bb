"""SIGTERM and SIGHUP to a program inside ``with Env.from_docker_image(...)``, for ``openenv.sync`` and ``openenv.aio``.

The container must be removed: by the program's own handler when it has one
(the ``with`` block closes the client), else by the reaper process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openenv._blocking import process_registry

from . import leaks

pytestmark = pytest.mark.docker

CHILD = Path(__file__).resolve().parent / "fault_child.py"
ECHO = "openenv-test/echo:latest"


def _gone(engine: Any, name: str) -> bool:
    import docker.errors

    try:
        engine.api.inspect_container(name)
    except docker.errors.NotFound:
        return True
    return False


@pytest.mark.parametrize("flavour", ["sync", "aio"])
@pytest.mark.parametrize("handler", ["handler", "none"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signalled_program_leaves_no_container(
    docker_engine: Any, tmp_path: Path, flavour: str, handler: str, sig: signal.Signals
) -> None:
    env = {**os.environ, process_registry.RUNTIME_DIR_ENV: str(tmp_path / "registry")}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), flavour, ECHO, handler], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            _, err = proc.communicate(timeout=60)
            raise AssertionError(f"the child failed:\n{err.decode()[-3000:]}")
        name = json.loads(line)["container"]
        assert not _gone(docker_engine, name)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:  # a failure here must not leave the child (and its pipes) to a later test's garbage collection
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if handler == "handler":
        assert proc.returncode == 0, err.decode()[-2000:]
        assert _gone(docker_engine, name)  # removed by the with block, before the program ended
    else:
        assert proc.returncode == -sig
        leaks.assert_no_containers(docker_engine, timeout=60, label_pid=proc.pid)  # the reaper's work
