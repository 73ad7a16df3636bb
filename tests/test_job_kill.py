"""A job-wide kill (the owner and its reaper SIGKILLed at the same moment) still removes a pool's containers.

A Slurm job cancel, a Kubernetes pod kill or a cgroup kill ends every process
of the job at once, the reaper included.  The watchdog container
(`openenv._blocking.watchdog`) lives under the Docker engine, outside the job:
when its lifeline from the owner drops it removes the owner's containers, then
itself.  Each run starts ``tests/kill_child.py`` (``docker-pool``) in its own
session, then SIGKILLs every process that carries the run's token (the child,
its reaper) in one go: once a first container exists (a random moment of the
pool's start), or once the pool is up.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from openenv._blocking import watchdog

HERE = Path(__file__).resolve().parent
CHILD = HERE / "kill_child.py"
ECHO_IMAGE = "openenv-test/echo:latest"
TOKEN_VAR = "OPENENV_TEST_KILL_TOKEN"
#: the watchdog's grace, its sweep (2 s or more) and a loaded engine's removals
GRACE = 30.0


def _start(flavour: str, kind: str, target: str, token: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, TOKEN_VAR: token}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    env["OPENENV_WATCHDOG"] = "1"  # the test image may carry a registry digest (the pull tests pull it)
    return subprocess.Popen(
        [sys.executable, str(CHILD), flavour, kind, target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # the job: its own session, as a batch system would run it
    )


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _carriers(token: str) -> list[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _ours(engine: Any, pid: int) -> list[Any]:
    rows = engine.api.containers(all=True, filters={"label": ["org.openenv.managed=1", f"org.openenv.pid={pid}"]})
    return list(rows)


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


@pytest.mark.docker
@pytest.mark.parametrize("moment", ["starting", "up"])
@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_a_job_wide_kill_removes_the_pool_and_the_watchdog(docker_engine: Any, flavour: str, moment: str) -> None:
    token = uuid.uuid4().hex
    proc = _start(flavour, "docker-pool", ECHO_IMAGE, token)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"go"
        if moment == "up":
            line = proc.stdout.readline().strip()
            assert line == b"up", proc.stderr.read().decode()[-3000:] if proc.stderr else line
        else:  # a random moment once the first container of the pool exists
            role = watchdog.LABEL_ROLE
            assert _wait(
                lambda: any(r["Labels"].get(role) != watchdog.WATCHDOG_ROLE for r in _ours(docker_engine, proc.pid)), 60
            ), "no container was created"
            time.sleep(random.uniform(0, 0.3))  # noqa: S311 - where it lands is the point, not a decision
        roles = {r["Labels"].get(watchdog.LABEL_ROLE) for r in _ours(docker_engine, proc.pid)}
        assert watchdog.WATCHDOG_ROLE in roles, "no watchdog container runs beside the pool"
        job = _carriers(token)
        assert len(job) >= 2, "the owner and its reaper"
        for pid in job:  # everything at once: the owner's group and the reaper's (its own session)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate(timeout=60)
        assert _wait(lambda: not _carriers(token), 10), "a process of the job survived SIGKILL"
        killed = time.monotonic()
        gone = _wait(lambda: not _ours(docker_engine, proc.pid), GRACE)
        left = [r["Names"] for r in _ours(docker_engine, proc.pid)]
        assert gone, f"left {GRACE} s after a job-wide kill: {left}"
        print(f"\n{flavour} {moment}: every container gone {time.monotonic() - killed:.1f} s after the kill")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        for row in _ours(docker_engine, proc.pid):  # only this run's own (its PID label)
            docker_engine.api.remove_container(row["Id"], force=True)


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_a_kill_of_the_owner_and_its_reaper_ends_local_servers(flavour: str) -> None:
    # A cgroup kill ends the servers too (they are in the job's cgroup); a kill of the owner's session and
    # of its reaper leaves them (each runs in its own session): their lifeline from the owner ends them.
    token = uuid.uuid4().hex
    proc = _start(flavour, "process", "", token)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"go"
        assert proc.stdout.readline().strip() == b"up"
        job = [pid for pid in _carriers(token) if pid == proc.pid or "openenv._reaper" in _command(pid)]
        assert len(job) == 2, "the owner and its reaper"
        servers = [pid for pid in _carriers(token) if pid not in job]
        assert servers, "the server runs"
        for pid in job:
            os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        assert _wait(lambda: not _carriers(token), GRACE), [_command(pid) for pid in _carriers(token)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        for pid in _carriers(token):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


@pytest.mark.docker
def test_an_image_without_python3_falls_back_with_a_warning(
    docker_engine: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENENV_WATCHDOG_IMAGE", raising=False)
    empty = tmp_path / "empty.tar"
    subprocess.run(["tar", "-cf", str(empty), "-T", "/dev/null"], check=True)
    tag = f"openenv-test/no-python:{uuid.uuid4().hex[:12]}"
    subprocess.run(["docker", "import", str(empty), tag], check=True, capture_output=True)
    try:
        with caplog.at_level("WARNING", logger="openenv.docker"):
            assert watchdog.acquire(caplog, tag) is False
            assert watchdog.acquire(caplog, tag) is False  # warned once, not tried again
        assert [r.getMessage() for r in caplog.records if "no watchdog container" in r.getMessage()][1:] == []
        assert "not after a job-wide kill" in caplog.text
        assert _ours(docker_engine, os.getpid()) == []
    finally:
        watchdog.release(caplog)
        docker_engine.images.remove(tag, force=True)


@pytest.mark.docker
def test_the_watchdog_runs_while_containers_are_held_and_goes_with_the_last(
    docker_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENENV_WATCHDOG_IMAGE", raising=False)
    monkeypatch.setenv("OPENENV_WATCHDOG", "1")  # the test image may carry a registry digest (the pull tests)

    def watchdogs() -> list[Any]:
        return [r for r in _ours(docker_engine, os.getpid()) if r["Labels"].get(watchdog.LABEL_ROLE)]

    first, second = object(), object()
    assert watchdog.acquire(first, ECHO_IMAGE) is True
    try:
        assert watchdog.acquire(second, ECHO_IMAGE) is True
        [row] = watchdogs()
        assert row["State"] == "running"
        assert all(p.get("IP") in ("127.0.0.1", None) for p in row["Ports"])  # published on loopback only
        watchdog.release(second)
        watchdog.release(second)  # idempotent: the first still holds it
        assert len(watchdogs()) == 1
    finally:
        watchdog.release(first)
    assert watchdogs() == []  # removed before release() returned


@pytest.mark.docker
@pytest.mark.xdist_group("registry-images")  # it pulls and removes an image the pull tests use too
def test_a_pulled_image_runs_no_watchdog_unless_trusted(
    docker_engine: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog holds the Docker socket: never from a pulled image's ``python3`` unless the user says so."""
    import urllib.request

    registry = os.environ.get("OPENENV_TEST_REGISTRY", "127.0.0.1:5000")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://{registry}/v2/", timeout=2):
            pass
    except OSError:
        pytest.skip(f"no loopback registry answers at {registry} (scripts/docker_setup.py starts one)")
    image = f"{registry}/openenv-pull-probe:latest"
    docker_engine.images.pull(image)
    monkeypatch.delenv("OPENENV_WATCHDOG_IMAGE", raising=False)
    monkeypatch.delenv("OPENENV_WATCHDOG", raising=False)
    holder = object()
    try:
        with caplog.at_level("INFO", logger="openenv.docker"):
            assert watchdog.acquire(holder, image) is False
            assert watchdog.acquire(holder, image) is False  # said once
        said = [r.getMessage() for r in caplog.records if "pulled from a registry" in r.getMessage()]
        assert len(said) == 1 and "OPENENV_WATCHDOG_IMAGE" in said[0]
        assert [r for r in _ours(docker_engine, os.getpid()) if r["Labels"].get(watchdog.LABEL_ROLE)] == []
        monkeypatch.setenv("OPENENV_WATCHDOG", "1")  # the user trusts it: the same image now runs one
        assert watchdog.acquire(holder, image) is True
        assert [r for r in _ours(docker_engine, os.getpid()) if r["Labels"].get(watchdog.LABEL_ROLE)] != []
    finally:
        watchdog.release(holder)
        docker_engine.images.remove(image, force=True)
