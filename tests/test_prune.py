"""``python -m openenv prune`` ends stray local servers, found through the process registry, and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv._blocking import process_registry, procfs
from openenv._core.lifetimes import ProcessRecord, encode_record, record_name

from .leaks import alive, children

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "registry"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv(process_registry.RUNTIME_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _sleeper(started: list[subprocess.Popen[bytes]]) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(SLEEPER, start_new_session=True)
    started.append(proc)
    start = None
    while start is None:
        start = procfs.process_start_time(proc.pid)
    return proc, start


def _dead_owner() -> tuple[int, int]:
    """A PID and start time of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procfs.process_start_time(proc.pid)
    proc.wait()
    return proc.pid, start or 1


def _write(folder: Path, record: ProcessRecord) -> Path:
    path = folder / record_name(record.pid, record.start_time)
    path.write_text(encode_record(record))
    return path


def _prune(*args: str) -> str:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}  # leave containers alone here
    done = subprocess.run(
        [sys.executable, "-m", "openenv", "prune", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> bool:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_prune_stops_a_stray_server_whose_owner_is_gone(
    registry: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    proc, start = _sleeper(sleepers)
    owner, owner_start = _dead_owner()
    path = _write(registry, ProcessRecord(proc.pid, start, owner, owner_start, procfs.boot_id(), SLEEPER, 0.0))

    out = _prune("--dry-run")
    assert f"pid={proc.pid}" in out and "would stop" in out
    assert proc.poll() is None and path.exists()

    out = _prune()
    assert "stopped" in out
    assert _wait_exit(proc)
    assert not path.exists()


#: A sleeper that blocks SIGTERM, then says so: a SIGTERM sent to it stays pending, for the test to see at once.
DEAF_SLEEPER = [
    sys.executable,
    "-c",
    "import signal, sys, time; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); "
    "print('deaf', flush=True); time.sleep(300)",
]


def _pending_sigterm(pid: int) -> bool:
    """Whether a SIGTERM waits, blocked, on process ``pid`` (``/proc/<pid>/status``: ``SigPnd``, ``ShdPnd``)."""
    bit = 1 << (signal.SIGTERM - 1)
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return any(int(fields[name].strip(), 16) & bit for name in ("SigPnd", "ShdPnd"))


def test_prune_never_touches_a_process_whose_start_time_differs(
    registry: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    proc = subprocess.Popen(DEAF_SLEEPER, start_new_session=True, stdout=subprocess.PIPE)
    sleepers.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"deaf\n"  # SIGTERM is blocked from here on
    start = procfs.process_start_time(proc.pid)
    assert start is not None
    owner, owner_start = _dead_owner()
    path = _write(registry, ProcessRecord(proc.pid, start + 1, owner, owner_start, procfs.boot_id(), SLEEPER))
    out = _prune("--all")
    assert "already gone" in out
    assert not path.exists()  # the stale record is dropped
    assert not _pending_sigterm(proc.pid)  # the process that now has the PID was never signalled
    assert procfs.kill_group(proc.pid, start + 1) is False
    assert not _pending_sigterm(proc.pid) and proc.poll() is None
    os.killpg(proc.pid, signal.SIGTERM)  # the check itself sees a SIGTERM that was sent
    assert _pending_sigterm(proc.pid)
    proc.stdout.close()


def test_prune_keeps_servers_of_live_owners_unless_all(registry: Path, sleepers: list[subprocess.Popen[bytes]]) -> None:
    proc, start = _sleeper(sleepers)
    me = os.getpid()
    my_start = procfs.process_start_time(me)
    assert my_start is not None
    path = _write(registry, ProcessRecord(proc.pid, start, me, my_start, procfs.boot_id(), SLEEPER))
    assert "kept" in _prune()
    assert proc.poll() is None and path.exists()
    assert "stopped" in _prune("--all")
    assert _wait_exit(proc)
    assert not path.exists()


def test_the_registry_lists_a_running_server_and_forgets_it_when_stopped(registry: Path) -> None:
    from openenv.sync import ProcessProvider

    provider = ProcessProvider([*SLEEPER[:2], "import sys, time; time.sleep(300)", "{port}"])
    provider.start()
    try:
        (record,) = process_registry.list_records()
        assert record.owner_pid == os.getpid() and record.pid in children()  # the server this process started
        assert "time.sleep(300)" in " ".join(record.command)
        assert record.start_time == procfs.process_start_time(record.pid)
    finally:
        provider.stop()
    assert process_registry.list_records() == [] and not alive(record.pid)


def test_dry_run_cuts_command_lines_between_words(registry: Path, sleepers: list[subprocess.Popen[bytes]]) -> None:
    proc, start = _sleeper(sleepers)
    owner, owner_start = _dead_owner()
    command = ["/opt/" + "x" * 45, "--port", "34823"]  # a cut at 60 characters would land in the number
    _write(registry, ProcessRecord(proc.pid, start, owner, owner_start, procfs.boot_id(), command))
    out = _prune("--dry-run")
    line = next(line for line in out.splitlines() if f"pid={proc.pid}" in line)
    assert "--port …" in line and "--port 3" not in line


def test_prune_sweeps_temporary_records_of_dead_writers(registry: Path) -> None:
    dead, _ = _dead_owner()
    stale = registry / f"process-1-2.json.{dead}.tmp"  # its writer was killed mid-write
    mine = registry / f"process-3-4.json.{os.getpid()}.tmp"  # a live writer's, being written
    old = registry / f"process-5-6.json.{os.getpid()}.tmp"
    for path in (stale, mine, old):
        path.write_text("{")
    os.utime(old, (time.time() - 3600, time.time() - 3600))  # older than any write takes
    other = registry / "unrelated.tmp"
    other.write_text("")
    _prune("--dry-run")
    assert stale.exists()  # a dry run changes nothing
    _prune()
    assert not stale.exists() and not old.exists()
    assert mine.exists() and other.exists()


@pytest.mark.docker
def test_prune_leaves_a_look_alike_container_alone(docker_engine: Any, registry: Path) -> None:
    dead, _ = _dead_owner()
    # org.openenv.managed=1 and a dead PID, but no owner identity: not provably ours
    name = f"openenv-lookalike-{dead}-{os.urandom(3).hex()}"
    docker_engine.containers.create(
        "openenv-test/never:latest",
        name=name,
        labels={"org.openenv.managed": "1", "org.openenv.pid": str(dead), "org.openenv.test.suite": "test_prune"},
    )
    try:
        env = {**os.environ}  # the real engine this time; a dry run changes nothing on it
        done = subprocess.run(
            [sys.executable, "-m", "openenv", "prune", "--dry-run"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        line = next(line for line in done.stdout.splitlines() if line.startswith(name))
        assert "no owner identity: left alone" in line
        docker_engine.api.inspect_container(name)  # still there
    finally:
        docker_engine.api.remove_container(name, force=True)


_EXTERNAL_OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from openenv.sync import Env, OpenEnvProvider
from tests.openenv_shaped import RuntimeLike
env = Env.from_provider(OpenEnvProvider(RuntimeLike()), ready_timeout=60)
print("ready", flush=True)
time.sleep(300)
"""


def test_prune_lists_a_sandbox_whose_owner_was_killed_and_cannot_remove_it(registry: Path) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    owner = subprocess.Popen(
        [sys.executable, "-c", _EXTERNAL_OWNER, root], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        out = _prune("--dry-run")
        assert f"external owner={owner.pid}" in out and "RuntimeLike" in out and "kept (owner alive)" in out
        assert "127.0.0.1" not in out  # the URL is a secret: never recorded
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    out = _prune("--dry-run")
    assert f"external owner={owner.pid}" in out and "owner gone" in out
    assert any(name.startswith("external-") for name in os.listdir(registry))
    assert "record dropped" in _prune()
    assert not any(name.startswith("external-") for name in os.listdir(registry))
