"""Loop-free steps for running an environment server as a local child process.

Shared by both twins: the async twin reaches these through ``run_blocking`` /
``run_cleanup``, the sync twin calls them directly.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from .._core.errors import ProviderError
from . import lifetimes as _lifetimes

__all__ = [
    "ChildProcess",
    "free_port",
    "bind_listener",
    "start_process",
    "stop_process",
    "output_tail",
    "SERVER_FD",
]


@dataclass
class ChildProcess:
    """A started server process and the file its output goes to."""

    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    command: Sequence[str]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        """The exit code, or ``None`` while it runs."""
        return self.popen.poll()


#: The lowest port `free_port` picks (below it: services' well-known and registered ports people run).
_PICK_LOW = 15000
#: How many random ports `free_port` tries below the ephemeral range before it asks the kernel for one.
_PICK_TRIES = 32
_random = random.SystemRandom()  # not the seeded global generator: parallel test workers draw differently


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` a moment ago, for a server that binds it itself (racy: prefer `bind_listener()`).

    Picked at random between 15000 and the start of the kernel's ephemeral range
    (``net.ipv4.ip_local_port_range``, 32768 by default). Every ``bind`` to port 0 and
    every outgoing connection takes its port from that range, so the servers and
    clients other processes start before the child binds this one cannot take it
    (a port from the kernel, as this did before, could be handed to the next ``--port 0``
    server of another process: "address already in use").  A program binding this
    very port still could.  When no port there is free, the kernel picks one.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    high = _ephemeral_low()
    if high - _PICK_LOW >= _PICK_TRIES:
        for port in _random.sample(range(_PICK_LOW, high), _PICK_TRIES):
            with socket.socket(family) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bind_listener(host: str = "127.0.0.1", port: int | None = None) -> socket.socket:
    """A listening TCP socket on ``host`` (port ``port``, or one the kernel picks) to hand to a server.

    The caller hands its file descriptor to the child (`start_process()`'s ``listener``) and closes
    its own copy once the child started; no other program can take the port in between.

    Raises:
        ProviderError: the address cannot be bound (for example the port is taken).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port or 0))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ProviderError(f"cannot listen on {host}:{port or 0}: {exc.strerror or exc}") from exc
    except BaseException:
        sock.close()
        raise
    return sock


#: The POSIX shell that runs `LIFELINE_SCRIPT` (``None``: start servers directly).
SHELL = "/bin/sh" if os.name == "posix" and os.access("/bin/sh", os.X_OK) else None

#: The file descriptor a server started through the lifeline finds its listening socket on.
SERVER_FD = 3

# ``sh -c LIFELINE_SCRIPT openenv-lifeline HAS_LISTENER COMMAND...``, in the server's new session,
# with the lifeline (the read end of a pipe whose write end only the owner holds) as its standard
# input and the listening socket, if any, as its standard error.  The shell moves the lifeline to
# fd 4 and starts a watcher, a background subshell left in the server's process group: it drops its
# copy of the listener, ignores SIGTERM (a group SIGTERM from the reaper must not end the watcher
# before the server; `stop_process()` and the reaper SIGKILL the group once the server is gone),
# and waits for EOF on fd 4, which comes when the owner is gone, however it
# died and at whatever moment (even before the shell ran: EOF is sticky).  It then ends the group:
# SIGTERM, up to 5 s for the server (polled with few ``sleep`` runs: cheap on a loaded machine),
# SIGKILL.  The shell itself becomes the server (``exec``), with the listener on fd 3
# (`SERVER_FD`), its output on the log, and /dev/null as its input.  Only single-digit
# descriptors: dash (Debian's /bin/sh) knows no others.  No ``preexec_fn`` (unsafe with threads)
# and no parent-death signal (it fires when the parent *thread* ends, such as a pool's worker).
LIFELINE_SCRIPT = """\
listener=$1
shift
exec 4<&0 </dev/null
(
  exec >/dev/null 2>&1
  trap '' HUP INT TERM
  while read -r _ <&4; do :; done
  kill -TERM 0
  for wait in 0.1 0.1 0.1 0.1 0.1 0.5 0.5 0.5 1 2; do
    kill -0 "$$" 2>/dev/null || break
    stat=
    [ -r "/proc/$$/stat" ] && read -r stat <"/proc/$$/stat"
    case $stat in *") Z "*) break ;; esac
    sleep "$wait"
  done
  kill -KILL 0
) &
if [ "$listener" = 1 ]; then exec "$@" 4<&- 3<&2 2>&1; fi
exec "$@" 4<&-
"""


def _check_executable(program: str, cwd: str | None, environment: Mapping[str, str]) -> None:
    """Raise the error ``exec`` would give, before the shell runs it (it could only exit with 127)."""
    if os.sep in program:
        path = os.path.join(cwd or os.getcwd(), program)
        if not os.path.exists(path):
            raise ProviderError(f"cannot start {program!r}: No such file or directory")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise ProviderError(f"cannot start {program!r}: Permission denied")
        return
    if shutil.which(program, path=environment.get("PATH", os.defpath)) is None:
        raise ProviderError(f"cannot start {program!r}: No such file or directory (not found on PATH)")


def start_process(
    command: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    listener: int | None = None,
) -> ChildProcess:
    """Start ``command`` in its own session (so its own process group), its output in a temporary file.

    The server dies with this program whatever happens: it is started through a
    tiny ``/bin/sh`` wrapper (`LIFELINE_SCRIPT`) that leaves a watcher in its
    process group, holding the read end of this process's lifeline pipe; the
    owner's death (even a SIGKILL a microsecond after the fork, before anything
    was registered anywhere) ends the group.  Without ``/bin/sh`` the command is
    started directly.

    Args:
        command: the command; ``{fd}`` in its items is replaced with the file
            descriptor the server finds ``listener`` on.
        cwd: its working directory.
        env: variables added to this process's environment.
        listener: a listening socket's file descriptor to hand to the server.
    """
    log = tempfile.TemporaryFile(prefix="openenv-server-")
    # The child writes through the same open file as our reads (one shared offset): with O_APPEND
    # its writes always land at the end, whatever output_tail() last seeked to.
    if os.name == "posix":
        import fcntl

        fcntl.fcntl(log.fileno(), fcntl.F_SETFL, fcntl.fcntl(log.fileno(), fcntl.F_GETFL) | os.O_APPEND)
    environment = dict(os.environ)
    environment.update(env or {})
    lifeline = _lifetimes.lifeline_fd() if SHELL is not None else None
    stdin: int = subprocess.DEVNULL
    stderr: int = subprocess.STDOUT
    inherited: tuple[int, ...] = ()
    wrapped = lifeline is not None and SHELL is not None
    if lifeline is not None and SHELL is not None:
        server_fd = str(SERVER_FD) if listener is not None else ""
        final = [part.replace("{fd}", server_fd) for part in command]
        argv = [SHELL, "-c", LIFELINE_SCRIPT, "openenv-lifeline", "0" if listener is None else "1", *final]
        stdin = lifeline
        if listener is not None:
            stderr = listener
    else:
        final = [part.replace("{fd}", "" if listener is None else str(listener)) for part in command]
        argv = list(final)
        inherited = () if listener is None else (listener,)
    try:
        if wrapped:
            _check_executable(final[0], cwd, environment)
        popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=environment,
            stdin=stdin,
            stdout=log,
            stderr=stderr,
            start_new_session=True,
            pass_fds=inherited,
        )
    except OSError as exc:
        log.close()
        raise ProviderError(f"cannot start {final[0]!r}: {exc.strerror or exc}") from exc
    except BaseException:
        log.close()
        raise
    return ChildProcess(popen, log, final)


def output_tail(child: ChildProcess, lines: int = 20, limit: int = 4000) -> str:
    """The last lines the process wrote (stdout and stderr together)."""
    try:
        child.log.flush()
        size = child.log.seek(0, os.SEEK_END)
        child.log.seek(max(0, size - limit))
        text = child.log.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_process(child: ChildProcess, timeout: float = 5.0) -> None:
    """Stop the whole process group: SIGTERM, then SIGKILL after ``timeout``; idempotent."""
    popen = child.popen
    if popen.poll() is None:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                popen.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # what is left of the group: the lifeline's watcher, which ignores SIGTERM
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        try:  # the leader is gone; its group may not be
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        child.log.close()
    except OSError:
        pass
