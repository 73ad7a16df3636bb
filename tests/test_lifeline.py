"""The lifeline a local server is started with: what the server and its watcher hold, and what they do not.

The kill sweep (``tests/test_kill_sweep.py``) proves that a server dies with its
owner; these tests pin down the wiring, in this process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from openenv._blocking import lifetimes, process, procfs
from openenv._core.errors import ProviderError

pytestmark = pytest.mark.skipif(process.SHELL is None, reason="needs /bin/sh")

SERVER = """
import socket, sys, time
listener = socket.socket(fileno=int(sys.argv[1]))
print("listening", listener.getsockname()[1], flush=True)
time.sleep(float(sys.argv[2]))
"""


def _fds(pid: int) -> dict[int, str]:
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass
    return found


def _group(pgid: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getpgid(int(name)) == pgid:
                    members.append(int(name))
            except OSError:
                pass
    return members


def _wait(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_the_server_holds_its_socket_and_nothing_of_the_lifeline() -> None:
    listener = process.bind_listener()
    port = listener.getsockname()[1]
    child = process.start_process([sys.executable, "-c", SERVER, "{fd}", "300"], listener=listener.fileno())
    listener.close()
    try:
        assert child.command[-2] == str(process.SERVER_FD)
        assert _wait(lambda: "listening" in process.output_tail(child))
        assert str(port) in process.output_tail(child)
        fds = _fds(child.pid)
        assert sorted(fds) == [0, 1, 2, 3] and fds[0] == "/dev/null" and fds[3].startswith("socket:")
        watchers = [pid for pid in _group(child.pid) if pid != child.pid]
        assert watchers, "no watcher in the server's process group"
        lifeline = lifetimes.lifeline_fd()
        assert lifeline is not None
        pipe = os.readlink(f"/proc/self/fd/{lifeline}")
        for watcher in watchers:
            held = _fds(watcher).values()
            assert pipe in held  # it watches the lifeline
            assert not any(target.startswith("socket:") for target in held)  # and does not hold the port
    finally:
        process.stop_process(child)
    assert _wait(lambda: _group(child.pid) == []), "the server's group outlived stop_process"


def _listening(port: int) -> set[str]:
    """The ``socket:[inode]`` names of the sockets listening on ``port`` (``/proc/net/tcp``, ``tcp6``)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as rows:
                lines = rows.read().splitlines()[1:]
        except OSError:
            continue
        for fields in (line.split() for line in lines):
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.add(f"socket:[{fields[9]}]")
    return found


def test_a_server_that_exits_by_itself_frees_its_port() -> None:
    listener = process.bind_listener()
    port = listener.getsockname()[1]
    name = os.readlink(f"/proc/self/fd/{listener.fileno()}")
    assert name in _listening(port)
    child = process.start_process([sys.executable, "-c", SERVER, "{fd}", "0"], listener=listener.fileno())
    listener.close()
    try:
        assert _wait(lambda: child.exit_code() is not None)
        # its watcher lives on until stop_process, but holds no copy of the listening socket, so
        # the socket is gone (judged by its inode: another program may bind the freed port at once)
        watchers = [pid for pid in _group(child.pid) if pid != child.pid]
        assert watchers, "no watcher in the server's process group"
        for watcher in watchers:
            assert name not in _fds(watcher).values()
        assert name not in _listening(port)
    finally:
        process.stop_process(child)


def test_a_command_that_cannot_run_is_refused_before_anything_starts() -> None:
    with pytest.raises(ProviderError, match="cannot start 'no-such-program-here'"):
        process.start_process(["no-such-program-here", "--port", "1"])
    with pytest.raises(ProviderError, match="Permission denied"):
        process.start_process([os.path.dirname(sys.executable)])


STUBBORN_OWNER = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from openenv._blocking import process
server = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(300)"
child = process.start_process([sys.executable, "-c", server])
print(child.pid, flush=True)
while "up" not in process.output_tail(child):
    pass
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_server_that_ignores_sigterm_is_killed_when_its_owner_dies() -> None:
    src = os.path.dirname(os.path.dirname(os.path.abspath(process.__file__)))
    owner = subprocess.run(
        [sys.executable, "-c", STUBBORN_OWNER, os.path.dirname(src)], capture_output=True, text=True, timeout=120
    )
    assert owner.returncode == -9, owner.stderr
    server = int(owner.stdout.split()[0])
    try:
        assert _wait(lambda: procfs.process_start_time(server) is None, 60), "the server outlived its owner"
    finally:
        if procfs.process_start_time(server) is not None:
            os.killpg(server, 9)


def test_a_port_picked_for_a_server_is_one_no_port_0_bind_can_take() -> None:
    """``free_port`` (a ``{port}`` command's port) is below the ephemeral range every ``bind(port 0)`` draws from.

    Stop 34's CI: a server told ``--port P`` found P taken ("address already in use") by another test
    worker's ``--port 0`` server, between the pick and its own bind.
    """
    with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
        ephemeral_low = int(f.read().split()[0])
    picked = {process.free_port() for _ in range(20)}
    assert all(15000 <= port < ephemeral_low for port in picked), picked
    assert len(picked) > 1  # drawn at random, not one port every time
    for port in picked:  # and free: a server can bind it
        with socket.create_server(("127.0.0.1", port)):
            pass
    busy = socket.create_server(("127.0.0.1", 0))  # a kernel-chosen port is never handed out by the pick
    with busy:
        assert busy.getsockname()[1] >= ephemeral_low
