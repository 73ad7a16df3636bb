"""A program SIGKILLed at any moment while it starts servers leaves nothing behind, in both flavours.

Each run starts ``tests/kill_child.py`` (one flavour, one kind of server), waits
for its ``go`` (written right before ``from_provider`` / ``from_env`` /
``EnvPool.from_env`` / ``from_docker_image`` is called), sleeps ``delay``
milliseconds and SIGKILLs it.  Then, within a grace period, every process that
carries the run's token in its environment (the servers, their lifeline
watchers, the reaper) must be gone, its registry directory empty, and no
container labelled with its PID may be left.

The bounded form runs a few kill points per flavour and kind.  The long form
(every millisecond of the first 50 ms, then coarser up to 3 s) runs with
``OPENENV_KILL_SWEEP=long`` and prints its figures::

    OPENENV_KILL_SWEEP=long nox -s tests -- tests/test_kill_sweep.py -q -s
    OPENENV_KILL_SWEEP=long nox -s docker -- tests/test_kill_sweep.py -q -s
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from openenv._blocking import process_registry, procfs

HERE = Path(__file__).resolve().parent
CHILD = HERE / "kill_child.py"
CHECKOUT = HERE / "openenv_envs" / "checkout_echo"
ECHO_IMAGE = "openenv-test/echo:latest"
TOKEN_VAR = "OPENENV_TEST_KILL_TOKEN"
FLAVOURS = ("sync", "aio")
LONG = os.environ.get("OPENENV_KILL_SWEEP") == "long"

#: milliseconds after ``go``: the long form covers every one of the first 50, then coarser
BOUNDED_DELAYS = (0, 2, 5, 10, 20, 50, 150)
LONG_DELAYS = (*range(50), *range(50, 300, 10), *range(300, 3000, 100))
BOUNDED_DOCKER_DELAYS = (0, 20, 100, 250, 400, 700)


def _delays(docker: bool) -> tuple[int, ...]:
    if LONG:
        return LONG_DELAYS
    return BOUNDED_DOCKER_DELAYS if docker else BOUNDED_DELAYS


def carriers(token: str) -> list[int]:
    """The live processes whose environment holds ``TOKEN_VAR=token``."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[:1]
        except OSError:
            continue
        if state not in ([b"Z"], [b"X"]) and needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def _describe(pids: list[int]) -> str:
    lines = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"{pid}: {command[:150]}")
        except OSError:
            lines.append(f"{pid}: (gone)")
    return "\n".join(lines)


def _poll(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def _end_carriers(token: str) -> None:
    """Test cleanup after a failure: end what this run left (only processes carrying its token)."""
    for pid in carriers(token):
        try:
            group = os.getpgid(pid)
            if group == os.getpgid(0):  # never this test's own group
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


class Run:
    """One child program, killed after ``delay`` ms; what it left is read afterwards."""

    def __init__(self, tmp: Path, flavour: str, kind: str, target: str, die_at: str = "") -> None:
        self.token = uuid.uuid4().hex
        self.registry = tmp / f"registry-{self.token[:8]}"
        env = {**os.environ, TOKEN_VAR: self.token, process_registry.RUNTIME_DIR_ENV: str(self.registry)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
        argv = [sys.executable, str(CHILD), flavour, kind, target, *([die_at] if die_at else [])]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def kill_after(self, delay_ms: int) -> str:
        """Wait for ``go``, sleep, SIGKILL; return the child's last stdout line."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"go":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=60)
            raise AssertionError(f"the child failed before go: {line!r}\n{err.decode()[-3000:]}")
        time.sleep(delay_ms / 1000)
        self.proc.send_signal(signal.SIGKILL)
        out, _ = self.proc.communicate(timeout=60)  # returns once nobody holds its pipes any more
        return out.decode().strip().rpartition("\n")[2]

    def wait_killed(self) -> str:
        """For ``DIE_AT`` runs: the child's whole stdout once it died."""
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == -signal.SIGKILL, err.decode()[-3000:]
        return out.decode()

    def leftovers(self, grace: float = 60.0, settle: float = 1.0) -> tuple[list[int], list[str]]:
        """Processes and registry files still there after ``grace`` seconds (polled: empty once all
        are gone and nothing came back for ``settle`` seconds).

        One scan of ``/proc`` finding nothing is not enough: the owner, SIGKILLed
        while a thread was in ``vfork()``, leaves a child that still goes on to
        exec the server's shell, and a process inside ``execve`` does not show
        its environment (the token) for a moment.  That shell sees its lifeline
        at EOF and ends its group at once; a scan in that moment saw nothing, the
        next one the shell and its watcher.
        """

        def files() -> list[str]:
            return sorted(os.listdir(self.registry)) if self.registry.exists() else []

        deadline = time.monotonic() + grace
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if carriers(self.token) or files():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle:
                break
            time.sleep(0.05)
        return carriers(self.token), files()

    def cleanup(self) -> None:
        _end_carriers(self.token)


def _containers_of(engine: Any, pid: int) -> list[str]:
    found = engine.containers.list(all=True, filters={"label": f"org.openenv.pid={pid}"})
    return [c.name for c in found if c.labels.get("org.openenv.managed") == "1"]


@pytest.fixture
def checkout(tmp_path: Path) -> str:
    target = tmp_path / "checkout_echo"
    shutil.copytree(CHECKOUT, target)
    return str(target)


FIGURES: dict[str, list[int]] = {}  # "flavour kind" -> [runs, leaks]


def _record(flavour: str, kind: str, leaked: bool) -> None:
    runs, leaks = FIGURES.setdefault(f"{flavour} {kind}", [0, 0])
    FIGURES[f"{flavour} {kind}"] = [runs + 1, leaks + int(leaked)]


@pytest.fixture(scope="module", autouse=True)
def _print_figures() -> Any:
    yield
    if FIGURES:
        print("\nkill sweep (runs, leaks):", ", ".join(f"{k}: {r} runs, {lk} leaks" for k, (r, lk) in FIGURES.items()))


# --------------------------------------------------------------------------- exact points


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_server_spawned_but_not_yet_registered_dies_with_its_owner(tmp_path: Path, flavour: str) -> None:
    # the child SIGKILLs itself right after the fork: no registry record, the reaper not told
    run = Run(tmp_path, flavour, "process", "", die_at="spawned")
    try:
        out = run.wait_killed()
        server = int(out.split("server ", 1)[1].split()[0])
        processes, files = run.leftovers()
        assert processes == [], f"left running:\n{_describe(processes)}"
        assert procfs.process_start_time(server) is None
        assert files == []
    finally:
        run.cleanup()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_program_killed_mid_write_leaves_no_temporary_record(tmp_path: Path, flavour: str) -> None:
    run = Run(tmp_path, flavour, "process", "", die_at="mid-write")
    try:
        run.wait_killed()
        processes, files = run.leftovers()
        assert processes == [], f"left running:\n{_describe(processes)}"
        assert files == []  # the reaper swept its owner's half-written record
    finally:
        run.cleanup()


# --------------------------------------------------------------------------- the sweep


def _sweep(tmp_path: Path, flavour: str, kind: str, target: str, delay: int, engine: Any = None) -> None:
    run = Run(tmp_path, flavour, kind, target)
    try:
        run.kill_after(delay)
        processes, files = run.leftovers()
        containers: list[str] = []
        if engine is not None:
            _poll(lambda: not _containers_of(engine, run.proc.pid), 60)
            containers = _containers_of(engine, run.proc.pid)
        _record(flavour, kind, bool(processes or files or containers))
        assert processes == [], f"killed at {delay} ms, left running:\n{_describe(processes)}"
        assert files == [], f"killed at {delay} ms, left in the registry: {files}"
        assert containers == [], f"killed at {delay} ms, containers left: {containers}"
    finally:
        run.cleanup()
        if engine is not None:
            for name in _containers_of(engine, run.proc.pid):
                engine.api.remove_container(name, force=True)


@pytest.mark.parametrize("delay", _delays(docker=False))
@pytest.mark.parametrize("kind", ["process", "checkout", "pool"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_killed_while_starting_processes(tmp_path: Path, checkout: str, flavour: str, kind: str, delay: int) -> None:
    _sweep(tmp_path, flavour, kind, checkout, delay)


@pytest.mark.docker
@pytest.mark.parametrize("delay", _delays(docker=True))
@pytest.mark.parametrize("kind", ["docker", "docker-pool"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_killed_while_starting_containers(
    tmp_path: Path, docker_engine: Any, flavour: str, kind: str, delay: int
) -> None:
    _sweep(tmp_path, flavour, kind, ECHO_IMAGE, delay, engine=docker_engine)
