"""Loop-free steps for running an environment server as a local child process.

Shared by both twins: the async twin reaches these through ``run_blocking`` /
``run_cleanup``, the sync twin calls them directly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from .._core.errors import ProviderError

__all__ = ["ChildProcess", "free_port", "bind_listener", "start_process", "stop_process", "output_tail"]


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


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago (racy: prefer `bind_listener()`)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def bind_listener(host: str = "127.0.0.1", port: int | None = None) -> socket.socket:
    """A listening TCP socket on ``host`` (port ``port``, or one the kernel picks) to hand to a server.

    The caller passes its file descriptor to the child (``pass_fds``) and closes
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


def start_process(
    command: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
) -> ChildProcess:
    """Start ``command`` in its own session (so its own process group), its output in a temporary file.

    ``pass_fds`` are file descriptors the child inherits (such as a listening socket).
    """
    log = tempfile.TemporaryFile(prefix="openenv-server-")
    environment = dict(os.environ)
    environment.update(env or {})
    try:
        popen = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        log.close()
        raise ProviderError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc
    except BaseException:
        log.close()
        raise
    return ChildProcess(popen, log, list(command))


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
    else:
        try:  # the leader is gone; its group may not be
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        child.log.close()
    except OSError:
        pass
