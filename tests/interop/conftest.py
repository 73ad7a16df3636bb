"""Interop fixtures: released OpenEnv packages in their own venvs, servers as subprocesses.

Nothing of the released packages is imported here.  Their venvs live in
``.nox/interop-releases/v<version>`` (created on first use, reused after);
``$OPENENV_INTEROP_VENVS`` overrides the folder.  Every server listens on
127.0.0.1 on a port no other process can take meanwhile (a socket it inherits,
or one it picks and prints) and is ended by its PID.  The matrix of what ran is
printed at the end of the session.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..envs import BOOT

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENVS = Path(os.environ.get("OPENENV_INTEROP_VENVS", ROOT / ".nox" / "interop-releases"))
PACKAGES = {"0.10.0": "openenv==0.10.0", "0.3.0": "openenv-core==0.3.0"}
VERSIONS = list(PACKAGES)

MATRIX: list[tuple[str, str, str, str, str]] = []  # (client, server, operation, outcome, note)


def record(client: str, server: str, operation: str, outcome: str = "ok", note: str = "") -> None:
    MATRIX.append((client, server, operation, outcome, note))


def venv_python(version: str) -> Path:
    """The Python of the released package's venv, creating the venv when missing."""
    venv = VENVS / f"v{version}"
    python = venv / "bin" / "python"
    marker = venv / ".openenv-installed"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", PACKAGES[version]], check=True)
        marker.write_text(PACKAGES[version])
    return python


def spawn_listening(
    command: list[str], cwd: Path, env: dict[str, str], log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``command`` with a listening socket on 127.0.0.1 (``{fd}`` in it: its descriptor); return it and its URL.

    The port is held from before the server starts.  A free port picked in advance and handed over as
    ``--port`` could be taken by another worker's server first: a released server then failed to bind,
    while the health check was answered by the other server, and the tests ran against that one until it
    stopped (CI: six "connection refused" after a "1012 server stopping").
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        full = [part.replace("{fd}", str(sock.fileno())) for part in command]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                full, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, pass_fds=[sock.fileno()]
            )
        return proc, f"http://127.0.0.1:{sock.getsockname()[1]}"


def _announced_url(proc: subprocess.Popen[bytes], log: Path, timeout: float = 240.0) -> str:
    """The URL that ``python -m openenv serve ... --port 0`` prints once it listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"^serving \S+ on (http://127\.0\.0\.1:\d+)$", log.read_text(errors="replace"), re.M)
        if found:
            return found.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"server did not say where it listens in {timeout} s:\n{log.read_text()[-3000:]}")


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = BOOT) -> None:
    # generous (tests/envs.py, BOOT): a released server imports its whole stack (FastAPI, gradio, ...) in a
    # fresh interpreter, which takes minutes when CI's lanes share two cores; a server that exits fails at once
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server at {url} not healthy in {timeout} s:\n{log.read_text()[-3000:]}")


class Servers:
    """Starts servers once per (kind, app, capacity) and stops them (by PID) at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.running: dict[tuple[str, str, int], tuple[subprocess.Popen[bytes], str]] = {}

    def _start(self, key: tuple[str, str, int], command: list[str], env: dict[str, str]) -> str:
        if key in self.running:
            return self.running[key][1]
        log = self.tmp / f"{'-'.join(map(str, key)).replace(':', '_')}.log"
        url: str | None = None
        if "{fd}" in command:  # uvicorn --fd: the socket is the server's from the start
            proc, url = spawn_listening(command, ROOT, env, log)
        else:  # ours, --port 0: it picks its port and prints it
            with open(log, "wb") as out:
                proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = url or _announced_url(proc, log)
            _wait_healthy(url, proc, log)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        self.running[key] = (proc, url)
        return url

    def released(self, version: str, app: str, capacity: int = 2) -> str:
        """A released server (uvicorn from its venv) serving ``released_apps:<app>``."""
        python = str(venv_python(version))
        env = {**os.environ, "MAX_CONCURRENT_ENVS": str(capacity), "ENABLE_WEB_INTERFACE": "false"}
        env.pop("OPENENV_MODE", None)
        command = [python, "-m", "uvicorn", f"released_apps:{app}", "--app-dir", str(HERE)]
        command += ["--fd", "{fd}", "--log-level", "warning"]
        return self._start((version, app, capacity), command, env)

    def ours(self, factory: str, capacity: int = 2, *, asgi: bool = False) -> str:
        """Our server: ``python -m openenv serve <factory>`` from our venv (``--asgi``: the ASGI app, uvicorn)."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "openenv", "serve", factory, "--port", "0"]
        command += ["--max-sessions", str(capacity)] + (["--asgi"] if asgi else [])
        return self._start(("ours-asgi" if asgi else "ours", factory, capacity), command, env)

    def stop(self) -> None:
        for proc, _ in self.running.values():
            proc.terminate()
        for proc, _ in self.running.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    found = Servers(tmp_path_factory.mktemp("interop-logs"))
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="session")
def drive() -> Callable[..., list[dict[str, Any]]]:
    """Run ``driver.py`` with a released client over one or more URLs; return its JSON result per URL."""

    def run(version: str, flavour: str, scenario: str, *urls: str) -> list[dict[str, Any]]:
        python = str(venv_python(version))
        done = subprocess.run(
            [python, str(HERE / "driver.py"), version, flavour, scenario, *urls],
            capture_output=True,
            text=True,
            timeout=180 * len(urls),
            cwd=str(HERE),
        )
        if done.returncode != 0:
            raise AssertionError(f"driver failed ({done.returncode}):\n{done.stderr[-3000:]}")
        results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["results"]
        assert len(results) == len(urls), (urls, results)
        return results

    return run


#: scenario -> (the released app it runs against, our server's factory for the same environment)
SCENARIO_SERVERS = {
    "counter": ("counter_app", "tests.interop.our_apps:CounterEnv"),
    "tools": ("tools_app", "openenv.server.tools_demo:ToolsDemoEnvironment"),
}


def server_group(scenario: str) -> pytest.MarkDecorator:
    """The ``xdist_group`` of every test on ``scenario``'s servers (released, both versions, and ours).

    With ``--dist loadgroup`` one worker runs them all: each of those servers starts in one
    worker only (the :class:`Servers` cache is per process), and the tests that share one
    :func:`driven` run find it done.
    """
    return pytest.mark.xdist_group(f"interop-{scenario}")


@pytest.fixture(scope="session")
def driven(servers: Servers, drive: Callable[..., list[dict[str, Any]]]) -> Callable[[str, str, str], dict[str, Any]]:
    """One released-client run per (version, flavour, scenario), shared by the tests that compare it.

    The run (one interpreter of the released client, see driver.py) drives the released server
    (``"theirs"``), then our embedded server (``"embedded"``), then our ASGI app (``"asgi"``), each URL
    on fresh client objects.  Tests that share a run are in one :func:`server_group`, so
    ``--dist loadgroup`` keeps them on one worker and the run happens once.
    """
    runs: dict[tuple[str, str, str], dict[str, Any]] = {}

    def get(version: str, flavour: str, scenario: str) -> dict[str, Any]:
        key = (version, flavour, scenario)
        if key not in runs:
            app, factory = SCENARIO_SERVERS[scenario]
            urls = {
                "theirs": servers.released(version, app, capacity=2),
                "embedded": servers.ours(factory, 2),
                "asgi": servers.ours(factory, 2, asgi=True),
            }
            runs[key] = dict(zip(urls, drive(version, flavour, scenario, *urls.values()), strict=True))
        return runs[key]

    return get


_REPORTED = [0]  # rows of MATRIX already attached to a report


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the rows a test recorded to its teardown report: they reach the process that prints the
    matrix (tests/conftest.py's summary), which is the xdist controller when workers run the tests."""
    outcome: Any = yield
    report = outcome.get_result()
    if report.when == "teardown" and len(MATRIX) > _REPORTED[0]:
        report.user_properties.append(("interop_matrix", MATRIX[_REPORTED[0] :]))
        _REPORTED[0] = len(MATRIX)
